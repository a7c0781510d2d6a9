package activities

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

// newStoredSetup is newCompileSetup for a repo_url stored as it is, past
// the settings' checks (as one stored before they refused it), with a
// Compiler as configure sets it up (nil: the defaults).
func newStoredSetup(t *testing.T, repoURL string, configure func(*Compiler)) *compileSetup {
	t.Helper()
	ctx := context.Background()
	db := testenv.Database(t)
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `update environments set settings = settings || jsonb_build_object('repo_url', $1::text)
		where id = $2::uuid`, repoURL, e.ID); err != nil {
		t.Fatal(err)
	}
	s := &compileSetup{st: st, env: e, c: &Compiler{Store: st, DataDir: t.TempDir()}}
	if configure != nil {
		configure(s.c)
	}
	var suite testsuite.WorkflowTestSuite
	s.acts = suite.NewTestActivityEnvironment()
	s.c.Register(s.acts)
	return s
}

// allowLoopback is the --compile-fetch-hosts of tests whose "remote"
// repositories listen on 127.0.0.1, which the default refuses.
func allowLoopback(t *testing.T) *fetchhosts.Policy {
	t.Helper()
	p, err := fetchhosts.Parse([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompileRefusesStoredRepoURL: a repo_url stored before the server
// refused it (a local repository on a server restarted without
// --allow-local-repos, a remote helper) fails the compile with the
// reason, and git is not run on it.
func TestCompileRefusesStoredRepoURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, url, message string
	}{
		{"a local path", "", "a local path needs intend server --allow-local-repos"},
		{"a file URL", "file://", "a local path needs intend server --allow-local-repos"},
		{"the ext transport", "ext::sh -c touch% CANARY", "names the git transport"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			repo := gittest.New(t)
			repo.Commit("main", model(`	motd: fs.#File & {path: "/etc/motd", content: "hello\n"}
`))
			url := c.url
			switch c.url {
			case "":
				url = repo.Bare
			case "file://":
				url = "file://" + repo.Bare
			}
			s := newStoredSetup(t, url, nil)
			in := s.start(t)
			if f := s.fetch(t, in); !f.Failed {
				t.Fatalf("fetch = %+v, want failed", f)
			}
			comp, _ := s.errors(t, in.ID)
			if comp.Status != store.CompileFailed || !strings.Contains(string(comp.Errors), c.message) {
				t.Errorf("compile = %+v, errors %s, want failed saying %q", comp, comp.Errors, c.message)
			}
			if _, err := os.Stat(filepath.Join(s.c.DataDir, "git")); !os.IsNotExist(err) {
				t.Errorf("git ran: the cache exists (%v)", err)
			}
		})
	}
}

// TestCompileRedactsCredentials: a repo_url with a password, stored
// before such URLs were refused, is still fetched, but the password shows
// in no error the compile records.
func TestCompileRedactsCredentials(t *testing.T) {
	t.Parallel()
	// Nothing listens on the port: git fails at once, naming the URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newStoredSetup(t, "https://ci:s3cret@"+addr+"/model.git", func(c *Compiler) {
		c.GitTimeout, c.FetchHosts = 30*time.Second, allowLoopback(t)
	})
	in := s.start(t)
	if f := s.fetch(t, in); !f.Failed {
		t.Fatalf("fetch = %+v, want failed", f)
	}
	comp, _ := s.errors(t, in.ID)
	if comp.Status != store.CompileFailed || strings.Contains(string(comp.Errors), "s3cret") ||
		!strings.Contains(string(comp.Errors), "https://ci:xxxxx@") {
		t.Errorf("errors %s, want the URL with its password redacted", comp.Errors)
	}
}

// TestFetchTimeLimit: a fetch that takes longer than GitTimeout is
// stopped and fails the compile, naming the limit. The "server" accepts
// the connection and never answers.
func TestFetchTimeLimit(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	s := newStoredSetup(t, "git://"+ln.Addr().String()+"/model.git", func(c *Compiler) {
		c.GitTimeout, c.FetchHosts = 500*time.Millisecond, allowLoopback(t)
	})
	in := s.start(t)
	began := time.Now()
	if f := s.fetch(t, in); !f.Failed {
		t.Fatalf("fetch = %+v, want failed", f)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("the fetch was stopped after %v, want about 500ms", took)
	}
	comp, _ := s.errors(t, in.ID)
	if !strings.Contains(string(comp.Errors), "git took longer than 500ms") {
		t.Errorf("errors %s, want the time limit named", comp.Errors)
	}
}

// TestCheckoutSizeLimit: a commit whose files add up to more than
// MaxTreeBytes fails the compile before anything is checked out.
func TestCheckoutSizeLimit(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	files := model(`	motd: fs.#File & {path: "/etc/motd", content: "hello\n"}
`)
	files["blob.bin"] = gittest.Text(strings.Repeat("x", 4096))
	repo.Commit("main", files)
	s := newStoredSetup(t, repo.Bare, func(c *Compiler) { c.AllowLocalRepos, c.MaxTreeBytes = true, 2048 })
	in := s.start(t)
	f := s.fetch(t, in)
	if f.Failed {
		t.Fatalf("fetch = %+v", f)
	}
	if b := s.build(t, in, f.Commit); !b.Failed {
		t.Fatalf("build = %+v, want failed", b)
	}
	comp, _ := s.errors(t, in.ID)
	if !strings.Contains(string(comp.Errors), "more than 2048 bytes") {
		t.Errorf("errors %s, want the size limit named", comp.Errors)
	}
}

// TestCheckoutOfAnOlderCommit: the fetch takes only the branch's tip
// (--depth 1); a build on a server whose cache lacks the compile's commit
// while the branch has moved on still checks that commit out.
func TestCheckoutOfAnOlderCommit(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	sha := repo.Commit("main", model(`	motd: fs.#File & {path: "/etc/motd", content: "one\n"}
`))
	s := newStoredSetup(t, repo.Bare, func(c *Compiler) { c.AllowLocalRepos = true })
	in := s.start(t)
	f := s.fetch(t, in)
	if f.Failed || f.Commit != sha {
		t.Fatalf("fetch = %+v, want %s", f, sha)
	}
	repo.Commit("main", model(`	motd: fs.#File & {path: "/etc/motd", content: "two\n"}
`))
	if err := os.RemoveAll(filepath.Join(s.c.DataDir, "git")); err != nil {
		t.Fatal(err)
	}
	if b := s.build(t, in, f.Commit); b.Failed || b.Version != 1 {
		comp, _ := s.errors(t, in.ID)
		t.Fatalf("build = %+v (errors %s), want version 1 of %s", b, comp.Errors, sha)
	}
	if shallow, err := os.ReadFile(filepath.Join(s.c.DataDir, "git", s.env.ID+".git", "shallow")); err != nil || len(shallow) == 0 {
		t.Errorf("the cache is not shallow: %v", err)
	}
}
