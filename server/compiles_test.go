package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

// modelRepo is a git repository whose bare side is what repo_url names.
type modelRepo struct {
	*gittest.Repo
	t *testing.T
}

func newModelRepo(t *testing.T) modelRepo {
	t.Helper()
	return modelRepo{gittest.New(t), t}
}

// push commits a project (intend.yaml and main.cue holding resources)
// to main and pushes it; it returns the commit's sha.
func (r modelRepo) push(resources string) string {
	r.t.Helper()
	return r.Commit("main", map[string]*string{
		"intend.yaml": gittest.Text("name: site\n"),
		"main.cue":    gittest.Text("package main\n\nimport \"intend.dev/std/fs\"\n\nresources: {\n" + resources + "}\n"),
	})
}

// siteResources is a model of a directory and a file in it.
func siteResources(dir, content string) string {
	return fmt.Sprintf(`	site: fs.#Directory & {path: %q, mode: "0755"}
	motd: fs.#File & {path: %q, content: %q, mode: "0644", requires: [site]}
`, dir, filepath.Join(dir, "motd"), content)
}

func startCompileServer(t *testing.T) (*client.Client, *server.Server) {
	t.Helper()
	c, s, _ := startValidated(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second, DataDir: t.TempDir(),
		AllowLocalRepos: true, // the model repositories are bare ones on local disk
		// or served by a git daemon on loopback, which a server refuses
		// unless told
		CompileFetchHosts: []string{"127.0.0.1"},
	})
	return c, s
}

// requestCompile POSTs .../compile and checks the 202 and its Location.
func requestCompile(t *testing.T, c *client.Client, env string) client.Compile {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.Base+"/api/v1/environments/"+env+"/compile", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST compile: %s %s", resp.Status, b)
	}
	var out client.Compile
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("/api/v1/environments/%s/compiles/%d", env, out.ID); resp.Header.Get("Location") != want {
		t.Errorf("Location = %q, want %q", resp.Header.Get("Location"), want)
	}
	return out
}

func getCompile(t *testing.T, c *client.Client, env string, id int64) client.Compile {
	t.Helper()
	var out client.Compile
	if err := c.Do(context.Background(), http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/compiles/%d", env, id),
		nil, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitCompile waits until a compile finished.
func waitCompile(t *testing.T, c *client.Client, env string, id int64, within time.Duration) client.Compile {
	t.Helper()
	var last client.Compile
	wait.For(t, "compile "+strconv.FormatInt(id, 10)+" to finish", within, func() error {
		last = getCompile(t, c, env, id)
		return wait.Unless(last.FinishedAt != nil, "compile %d: %+v", id, last)
	})
	return last
}

func waitContent(t *testing.T, path, want string) {
	t.Helper()
	wait.For(t, path+" to hold "+strconv.Quote(want), 60*time.Second, func() error {
		b, err := os.ReadFile(path)
		return wait.Unless(err == nil && string(b) == want, "%s = %q (%v), want %q", path, b, err, want)
	})
}

func listCompiles(t *testing.T, c *client.Client, env, query string) ([]client.Compile, string) {
	t.Helper()
	var out struct {
		Items []client.Compile `json:"items"`
		Next  string           `json:"next"`
	}
	if err := c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/compiles"+query, nil, &out); err != nil {
		t.Fatal(err)
	}
	return out.Items, out.Next
}

type compileProblem struct {
	Path      string `json:"path"`
	Message   string `json:"message"`
	Positions []struct {
		File string `json:"file"`
		Line int    `json:"line"`
	} `json:"positions"`
}

// TestAutonomousCompile: the server compiles an environment's git branch,
// exports and releases the version and the scheduler deploys it; a
// broken commit fails with structured errors and harms nothing; the fix
// makes a new version; an unchanged branch makes none.
func TestAutonomousCompile(t *testing.T) {
	c, s := startCompileServer(t)
	ctx := context.Background()
	repo := newModelRepo(t)
	site := filepath.Join(t.TempDir(), "site")
	motd := filepath.Join(site, "motd")
	sha1 := repo.push(siteResources(site, "hello\n"))
	env := newEnv(t, c, "auto", map[string]any{"repo_url": repo.Bare})

	queued := requestCompile(t, c, env)
	if queued.Reason != "api" || queued.RepoURL != repo.Bare || queued.Branch != "main" || queued.Success != nil ||
		queued.WorkflowID != workflows.CompileWorkflowID(env, queued.ID) {
		t.Errorf("requested compile = %+v", queued)
	}
	done := waitCompile(t, c, env, queued.ID, 60*time.Second)
	if done.Status != "succeeded" || done.Success == nil || !*done.Success || done.Commit != sha1 ||
		done.Version == nil || *done.Version != 1 || !*done.Exported || !*done.Released ||
		*done.ResourceCount != 2 || done.StartedAt == nil || done.Errors != nil {
		t.Fatalf("compile 1 = %+v", done)
	}
	if done.StartedAt.Before(done.RequestedAt) || done.FinishedAt.Before(*done.StartedAt) {
		t.Errorf("times out of order: requested %v, started %v, finished %v", done.RequestedAt, done.StartedAt, done.FinishedAt)
	}
	waitContent(t, motd, "hello\n")
	desc, err := s.Temporal().DescribeWorkflowExecution(ctx, done.WorkflowID, "")
	if err != nil {
		t.Fatalf("compile workflow %s: %v", done.WorkflowID, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("compile workflow status %v", st)
	}

	// A broken commit: failed, every error structured, nothing exported.
	repo.push(`	motd: fs.#File & {path: "/tmp/x", content: 42}
`)
	broken := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if broken.Status != "failed" || broken.Success == nil || *broken.Success || broken.Version != nil {
		t.Fatalf("broken compile = %+v", broken)
	}
	var problems []compileProblem
	if err := json.Unmarshal(broken.Errors, &problems); err != nil {
		t.Fatalf("errors %s: %v", broken.Errors, err)
	}
	found := false
	for _, p := range problems {
		for _, pos := range p.Positions {
			if strings.HasPrefix(p.Path, "resources.motd.content") && p.Message != "" && pos.File == "main.cue" && pos.Line == 6 {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("errors %s: none for resources.motd.content at main.cue:6", broken.Errors)
	}
	if e, err := c.EnsureEnvironment(ctx, "p-"+env, env); err != nil || e.LastVersion != 1 || *e.ReleasedVersion != 1 {
		t.Errorf("environment after the broken compile = %+v %v, want version 1 still", e, err)
	}

	// The fix: version 2, deployed.
	sha3 := repo.push(siteResources(site, "hello again\n"))
	fixed := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if fixed.Status != "succeeded" || fixed.Commit != sha3 || *fixed.Version != 2 || !*fixed.Exported {
		t.Fatalf("fixed compile = %+v", fixed)
	}
	waitContent(t, motd, "hello again\n")

	// Unchanged: the compile finds version 2 and exports nothing.
	same := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if same.Status != "succeeded" || *same.Version != 2 || *same.Exported {
		t.Fatalf("compile of an unchanged branch = %+v, want version 2, not exported", same)
	}
	var versions struct{ Items []client.VersionInfo }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/versions", nil, &versions); err != nil ||
		len(versions.Items) != 2 {
		t.Errorf("versions = %+v %v, want 2", versions.Items, err)
	}

	// The list: newest first, by pages.
	page, next := listCompiles(t, c, env, "?limit=3")
	if len(page) != 3 || page[0].ID != same.ID || page[2].ID != broken.ID || next != fmt.Sprint(broken.ID) {
		t.Fatalf("first page = %d items, next %q", len(page), next)
	}
	page, next = listCompiles(t, c, env, "?limit=3&before="+next)
	if len(page) != 1 || page[0].ID != done.ID || next != "" {
		t.Fatalf("second page = %+v, next %q", page, next)
	}
}

// TestCompileProblems: what the compile endpoints refuse.
func TestCompileProblems(t *testing.T) {
	c, _ := startCompileServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "norepo", nil)
	for _, tc := range []struct {
		method, path, body string
		status             int
		typ                string
	}{
		{http.MethodPost, "/compile", "", 422, client.TypeValidation},
		{http.MethodPost, "/compile", `{"branch":"x"}`, 422, client.TypeUnknownField},
		{http.MethodGet, "/compile", "", 405, client.TypeMethodNotAllowed},
		{http.MethodGet, "/compiles/7", "", 404, client.TypeNotFound},
		{http.MethodGet, "/compiles/x", "", 400, client.TypeBadRequest},
		{http.MethodGet, "/compiles?limit=0", "", 422, client.TypeInvalidField},
	} {
		var body any
		if tc.body != "" {
			body = []byte(tc.body)
		}
		err := c.Do(ctx, tc.method, "/api/v1/environments/"+env+tc.path, body, nil)
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != tc.status || p.Type != tc.typ {
			t.Errorf("%s %s: %v, want %d %s", tc.method, tc.path, err, tc.status, tc.typ)
		}
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/nosuch/compile", nil, nil); status(err) != 404 ||
		!strings.Contains(err.Error(), `environment "nosuch"`) {
		t.Errorf("compile of an unknown environment: %v", err)
	}
	if items, _ := listCompiles(t, c, env, ""); len(items) != 0 {
		t.Errorf("compiles = %+v, want none", items)
	}

	// An unknown repository fails with git's message.
	if err := c.Do(ctx, http.MethodPatch, "/api/v1/environments/"+env,
		map[string]any{"settings": map[string]any{"repo_url": filepath.Join(t.TempDir(), "nothing.git")}}, nil); err != nil {
		t.Fatal(err)
	}
	failed := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if failed.Status != "failed" || !strings.Contains(string(failed.Errors), "does not appear to be a git repository") {
		t.Errorf("compile of an unknown repository = %+v, errors %s", failed, failed.Errors)
	}
}

// gitGate serves the git protocol on loopback by passing connections to a
// git daemon; while held, it accepts connections but passes nothing, so a
// fetch waits, until released.
type gitGate struct {
	ln       net.Listener
	daemon   string
	mu       sync.Mutex
	hold     bool
	held     []net.Conn
	accepted chan struct{}
}

// startGitGate runs a git daemon exporting dir's repositories and a gate
// in front of it; repositories are at git://<gate.addr()>/<name>.
func startGitGate(t *testing.T, dir string) *gitGate {
	t.Helper()
	daemon := freeAddr(t)
	host, port, _ := net.SplitHostPort(daemon)
	cmd := exec.Command("git", "daemon", "--export-all", "--reuseaddr", "--informative-errors",
		"--base-path="+dir, "--listen="+host, "--port="+port, dir)
	// Its own process group: the daemon forks a process per connection,
	// and the cleanup kills them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	wait.For(t, "git daemon on "+daemon, 10*time.Second, func() error {
		c, err := net.Dial("tcp", daemon)
		if err == nil {
			c.Close()
		}
		return wait.Unless(err == nil, "git daemon on %s: %v", daemon, err)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gitGate{ln: ln, daemon: daemon, accepted: make(chan struct{}, 100)}
	t.Cleanup(func() {
		ln.Close()
		g.drop()
	})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			g.mu.Lock()
			if g.hold {
				g.held = append(g.held, conn)
				g.mu.Unlock()
				g.accepted <- struct{}{}
				continue
			}
			g.mu.Unlock()
			go g.pass(conn)
		}
	}()
	return g
}

func (g *gitGate) url(name string) string { return "git://" + g.ln.Addr().String() + "/" + name }

func (g *gitGate) setHold(hold bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = hold
}

// release passes the held connections on and holds no more.
func (g *gitGate) release() {
	g.mu.Lock()
	held := g.held
	g.held, g.hold = nil, false
	g.mu.Unlock()
	for _, c := range held {
		go g.pass(c)
	}
}

// drop closes the held connections.
func (g *gitGate) drop() {
	g.mu.Lock()
	held := g.held
	g.held = nil
	g.mu.Unlock()
	for _, c := range held {
		c.Close()
	}
}

func (g *gitGate) pass(c net.Conn) {
	defer c.Close()
	d, err := net.Dial("tcp", g.daemon)
	if err != nil {
		return
	}
	defer d.Close()
	go func() {
		_, _ = io.Copy(d, c)
		d.Close()
	}()
	_, _ = io.Copy(c, d)
}

// waitHeld waits until a fetch is held at the gate.
func (g *gitGate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.accepted:
	case <-time.After(60 * time.Second):
		t.Fatal("no fetch reached the git gate within 60 s")
	}
}

// TestCompileRequestsMerge: while a compile runs, the first request queues
// a compile and the next ones merge into it; the running one absorbs
// none; they run one after the other.
func TestCompileRequestsMerge(t *testing.T) {
	c, _ := startCompileServer(t)
	repo := newModelRepo(t)
	site := filepath.Join(t.TempDir(), "site")
	repo.push(siteResources(site, "one\n"))
	gate := startGitGate(t, filepath.Dir(repo.Bare))
	env := newEnv(t, c, "merge", map[string]any{"repo_url": gate.url("model.git")})

	gate.setHold(true)
	first := requestCompile(t, c, env)
	gate.waitHeld(t) // the first compile is fetching, held
	if got := getCompile(t, c, env, first.ID); got.Status != "running" {
		t.Fatalf("first compile = %+v, want running", got)
	}
	sha2 := repo.push(siteResources(site, "two\n"))
	var ids []int64
	for i := 0; i < 3; i++ {
		r := requestCompile(t, c, env)
		if r.Status != "queued" || r.Merged != i {
			t.Errorf("request %d = %+v, want queued with %d merged", i+2, r, i)
		}
		ids = append(ids, r.ID)
	}
	if ids[0] == first.ID || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Fatalf("requests got compiles %v (the running one is %d), want one new compile for all", ids, first.ID)
	}
	gate.release()
	one := waitCompile(t, c, env, first.ID, 60*time.Second)
	two := waitCompile(t, c, env, ids[0], 60*time.Second)
	if one.Status != "succeeded" || two.Status != "succeeded" || two.Merged != 2 || two.Commit != sha2 {
		t.Fatalf("compiles = %+v and %+v, want both succeeded, the second of %s with 2 merged", one, two, sha2)
	}
	if two.StartedAt.Before(*one.FinishedAt) {
		t.Errorf("the second compile started (%v) before the first finished (%v)", two.StartedAt, one.FinishedAt)
	}
	if all, _ := listCompiles(t, c, env, ""); len(all) != 2 {
		t.Errorf("%d compiles, want 2: %+v", len(all), all)
	}
	waitContent(t, filepath.Join(site, "motd"), "two\n")
}

// TestRecompileInterval: with recompile_interval set the server compiles
// the branch on its own; an unchanged branch adds no version.
func TestRecompileInterval(t *testing.T) {
	c, _ := startCompileServer(t)
	repo := newModelRepo(t)
	site := filepath.Join(t.TempDir(), "site")
	repo.push(siteResources(site, "scheduled\n"))
	env := newEnv(t, c, "sched", map[string]any{"repo_url": repo.Bare, "recompile_interval": 1})

	var got []client.Compile
	wait.For(t, "two scheduled compiles to succeed", 60*time.Second, func() error {
		got, _ = listCompiles(t, c, env, "")
		n := 0
		for _, x := range got {
			if x.Reason == "schedule" && x.Status == "succeeded" {
				n++
			}
		}
		return wait.Unless(n >= 2, "compiles %+v, want two schedule compiles succeeded", got)
	})
	waitContent(t, filepath.Join(site, "motd"), "scheduled\n")
	if err := c.Do(context.Background(), http.MethodPatch, "/api/v1/environments/"+env,
		map[string]any{"settings": map[string]any{"recompile_interval": 0}}, nil); err != nil {
		t.Fatal(err)
	}
	var versions struct{ Items []client.VersionInfo }
	if err := c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/versions", nil, &versions); err != nil ||
		len(versions.Items) != 1 {
		t.Errorf("versions = %+v %v, want 1 however many compiles ran", versions.Items, err)
	}
}

// TestServerKilledMidCompile: kill -9 the server while a compile fetches;
// once a server is back, the compile finishes (its fetch is retried) and
// exports exactly one version.
func TestServerKilledMidCompile(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	addr := freeAddr(t)
	args := []string{"server", "--listen", addr, "--database-url", db, "--temporal-address", hostPort,
		"--temporal-namespace", namespace, "--log-level", "warn", "--data-dir", t.TempDir(),
		"--compile-fetch-hosts", "127.0.0.1"} // the git daemon is on loopback
	srv1 := startProc(t, args...)
	c := procClient(addr)
	waitHealthy(t, c, srv1)

	repo := newModelRepo(t)
	site := filepath.Join(t.TempDir(), "site")
	sha := repo.push(siteResources(site, "survived\n"))
	gate := startGitGate(t, filepath.Dir(repo.Bare))
	env := newEnv(t, c, "crash", map[string]any{"repo_url": gate.url("model.git")})

	gate.setHold(true)
	comp := requestCompile(t, c, env)
	gate.waitHeld(t)
	srv1.Kill()
	gate.drop() // the killed server's git
	gate.setHold(false)

	srv2 := startProc(t, args...)
	waitHealthy(t, c, srv2)
	// The fetch is retried once its heartbeat times out (20 s).
	done := waitCompile(t, c, env, comp.ID, 120*time.Second)
	if done.Status != "succeeded" || done.Commit != sha || *done.Version != 1 || !*done.Released {
		t.Fatalf("compile after the restart = %+v\nserver output:\n%s", done, srv2.Out.String())
	}
	waitContent(t, filepath.Join(site, "motd"), "survived\n")
	var versions struct{ Items []client.VersionInfo }
	if err := c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/versions", nil, &versions); err != nil ||
		len(versions.Items) != 1 {
		t.Errorf("versions = %+v %v, want exactly 1", versions.Items, err)
	}
}
