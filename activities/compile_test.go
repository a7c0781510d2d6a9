package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// model is a project whose main.cue holds the given resources.
func model(resources string) map[string]*string {
	return map[string]*string{
		"intend.yaml": gittest.Text("name: site\n"),
		"main.cue":    gittest.Text("package main\n\nimport \"intend.dev/std/fs\"\n\nresources: {\n" + resources + "}\n"),
	}
}

type compileSetup struct {
	st   *store.Store
	env  store.Environment
	c    *Compiler
	acts *testsuite.TestActivityEnvironment
	woke atomic.Int32
}

func newCompileSetup(t *testing.T, repoURL string) *compileSetup {
	t.Helper()
	st, e := newTestEnv(t, map[string]json.RawMessage{"repo_url": json.RawMessage(mustJSON(t, repoURL))})
	s := &compileSetup{st: st, env: e}
	// The repositories of these tests are bare ones on local disk.
	s.c = &Compiler{Store: st, DataDir: t.TempDir(), AllowLocalRepos: true, Wake: func(context.Context, store.Environment, string) error {
		s.woke.Add(1)
		return nil
	}}
	var suite testsuite.WorkflowTestSuite
	s.acts = suite.NewTestActivityEnvironment()
	s.c.Register(s.acts)
	return s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// start queues a compile and takes it, as the queue workflow does.
func (s *compileSetup) start(t *testing.T) workflows.CompileInput {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.st.RequestCompile(ctx, s.env.ID, "api"); err != nil {
		t.Fatal(err)
	}
	take, err := s.c.TakeCompile(ctx, workflows.TakeCompileInput{EnvironmentID: s.env.ID})
	if err != nil || take.ID == 0 {
		t.Fatalf("take = %+v %v", take, err)
	}
	return workflows.CompileInput{EnvironmentID: s.env.ID, EnvironmentName: s.env.Name, ID: take.ID}
}

func (s *compileSetup) fetch(t *testing.T, in workflows.CompileInput) workflows.FetchCompileResult {
	t.Helper()
	v, err := s.acts.ExecuteActivity(workflows.FetchCompileActivity.Name(), in)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var out workflows.FetchCompileResult
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *compileSetup) build(t *testing.T, in workflows.CompileInput, commit string) workflows.BuildCompileResult {
	t.Helper()
	v, err := s.acts.ExecuteActivity(workflows.BuildCompileActivity.Name(),
		workflows.BuildCompileInput{EnvironmentID: in.EnvironmentID, ID: in.ID, Commit: commit})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	var out workflows.BuildCompileResult
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// compileErrors is a compile's recorded errors.
type recordedError struct {
	Path      string `json:"path"`
	Message   string `json:"message"`
	Positions []struct {
		File string `json:"file"`
		Line int    `json:"line"`
	} `json:"positions"`
}

func (s *compileSetup) errors(t *testing.T, id int64) (store.Compile, []recordedError) {
	t.Helper()
	c, err := s.st.GetCompile(context.Background(), s.env.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	var errs []recordedError
	if c.Errors != nil {
		if err := json.Unmarshal(c.Errors, &errs); err != nil {
			t.Fatalf("errors %s: %v", c.Errors, err)
		}
	}
	return c, errs
}

// TestCompileActivities runs a compile's activities one by one against a
// bare repository: fetch, compile and export, release, finish; then
// again, idempotently; then a second compile of the same commit exports
// nothing.
func TestCompileActivities(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	sha := repo.Commit("main", model(`	motd: fs.#File & {path: "/etc/motd", content: "hello\n"}
	issue: fs.#File & {path: "/etc/issue", content: "welcome\n", requires: [motd]}
`))
	s := newCompileSetup(t, repo.Bare)
	ctx := context.Background()

	in := s.start(t)
	f := s.fetch(t, in)
	if f.Failed || f.Commit != sha {
		t.Fatalf("fetch = %+v, want commit %s", f, sha)
	}
	b := s.build(t, in, f.Commit)
	if b.Failed || b.Version != 1 || !b.Exported || b.ResourceCount != 2 {
		t.Fatalf("build = %+v, want version 1 of 2 resources", b)
	}
	if again := s.build(t, in, f.Commit); again != b {
		t.Errorf("build again = %+v, want %+v", again, b)
	}
	rs, err := s.st.VersionResources(ctx, s.env.ID, 1, "", 10)
	if err != nil || len(rs) != 2 || rs[0].ID != "fs::File[localhost,path=/etc/issue]" ||
		len(rs[0].Requires) != 1 || rs[0].Requires[0] != "fs::File[localhost,path=/etc/motd]" {
		t.Fatalf("version 1 = %+v %v", rs, err)
	}
	rel, err := s.c.ReleaseCompile(ctx, workflows.ReleaseCompileInput{EnvironmentID: s.env.ID, ID: in.ID, Version: 1})
	if err != nil || !rel.Released || rel.DeployRequest == 0 || s.woke.Load() != 1 {
		t.Fatalf("release = %+v %v (woke %d), want released with a deploy request", rel, err, s.woke.Load())
	}
	yes := true
	if err := s.c.FinishCompile(ctx, workflows.FinishCompileInput{EnvironmentID: s.env.ID, ID: in.ID,
		Status: workflows.CompileSucceeded, Released: &yes}); err != nil {
		t.Fatal(err)
	}
	c, errs := s.errors(t, in.ID)
	if c.Status != store.CompileSucceeded || c.Commit != sha || *c.Version != 1 || len(errs) != 0 {
		t.Errorf("compile = %+v, errors %v", c, errs)
	}
	if entries, err := os.ReadDir(filepath.Join(s.c.DataDir, "work", s.env.ID)); err != nil || len(entries) != 0 {
		t.Errorf("work trees left behind: %v %v", entries, err)
	}

	// The same commit again, with the cache gone (another server fetched
	// it): the build fetches again, finds the same version, exports none.
	in2 := s.start(t)
	f2 := s.fetch(t, in2)
	if err := os.RemoveAll(filepath.Join(s.c.DataDir, "git")); err != nil {
		t.Fatal(err)
	}
	b2 := s.build(t, in2, f2.Commit)
	if b2.Failed || b2.Version != 1 || b2.Exported {
		t.Fatalf("build of an unchanged branch = %+v, want version 1, not exported", b2)
	}
	if vs, err := s.st.ListVersions(ctx, s.env.ID, 10); err != nil || len(vs) != 1 {
		t.Errorf("versions = %+v %v, want only 1", vs, err)
	}
}

// TestCompileFailures: what git refuses and what the model gets wrong
// fail the compile with structured errors; the activity itself succeeds.
func TestCompileFailures(t *testing.T) {
	t.Parallel()
	good := model(`	motd: fs.#File & {path: "/etc/motd", content: "hello\n"}
`)
	for _, c := range []struct {
		name     string
		repoURL  string
		settings string // extra setting, JSON
		files    map[string]*string
		// fetch says whether the fetch already fails.
		fetch   bool
		message string
		check   func(t *testing.T, errs []recordedError)
		// setup prepares the work tree before the commit.
		setup func(t *testing.T, work string)
	}{
		{name: "no such repository", repoURL: filepath.Join(t.TempDir(), "nothing.git"), fetch: true,
			message: "does not appear to be a git repository"},
		{name: "no such branch", settings: `{"repo_branch": "nope"}`, fetch: true,
			message: "couldn't find remote ref refs/heads/nope"},
		{name: "a wrong attribute", files: model(`	motd: fs.#File & {path: "/etc/motd", content: 42}
`), message: "conflicting values", check: func(t *testing.T, errs []recordedError) {
			var at []string
			for _, e := range errs {
				for _, p := range e.Positions {
					at = append(at, p.File)
					if p.File == "main.cue" && p.Line == 6 && strings.HasPrefix(e.Path, "resources.motd.content") {
						return
					}
				}
			}
			t.Errorf("no error at main.cue:6 for resources.motd.content among %+v (files %v)", errs, at)
		}},
		{name: "no intend.yaml", files: map[string]*string{"intend.yaml": nil},
			message: "not found", check: func(t *testing.T, errs []recordedError) {
				if len(errs) != 1 || len(errs[0].Positions) != 1 || errs[0].Positions[0].File != "intend.yaml" ||
					strings.Contains(errs[0].Message, os.TempDir()) {
					t.Errorf("errors = %+v, want one at intend.yaml without the server's paths", errs)
				}
			}},
		{name: "a requires cycle, refused by the export",
			files: model(`	a: fs.#File & {path: "/a", content: "", requires: ["fs::File[localhost,path=/b]"]}
	b: fs.#File & {path: "/b", content: "", requires: [a]}
`), message: "cycle", check: func(t *testing.T, errs []recordedError) {
				if len(errs) == 0 || !strings.Contains(errs[0].Message, "fs::File[localhost,path=/") || errs[0].Path == "" {
					t.Errorf("errors = %+v, want the cycle named by resource id and model path", errs)
				}
			}},
		{name: "a symlink out of the project", setup: func(t *testing.T, work string) {
			outside := filepath.Join(t.TempDir(), "secret.cue")
			if err := os.WriteFile(outside, []byte("package main\n\nleak: \"CANARY\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(work, "secret.cue")); err != nil {
				t.Fatal(err)
			}
		}, message: "secret.cue (a symbolic link)", check: func(t *testing.T, errs []recordedError) {
			for _, e := range errs {
				if strings.Contains(e.Message, "CANARY") {
					t.Errorf("the error shows what the link points at: %+v", e)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			repo := gittest.New(t)
			if c.setup != nil {
				c.setup(t, repo.Work)
			}
			files := map[string]*string{}
			for k, v := range good {
				files[k] = v
			}
			for k, v := range c.files {
				files[k] = v
			}
			repo.Commit("main", files)
			if c.repoURL == "" {
				c.repoURL = repo.Bare
			}
			s := newCompileSetup(t, c.repoURL)
			if c.settings != "" {
				var patch map[string]json.RawMessage
				if err := json.Unmarshal([]byte(c.settings), &patch); err != nil {
					t.Fatal(err)
				}
				if _, err := s.st.UpdateEnvironment(context.Background(), s.env.ID, store.EnvironmentPatch{Settings: patch}); err != nil {
					t.Fatal(err)
				}
			}
			in := s.start(t)
			f := s.fetch(t, in)
			if f.Failed != c.fetch {
				t.Fatalf("fetch = %+v, want failed=%v", f, c.fetch)
			}
			if !f.Failed {
				if b := s.build(t, in, f.Commit); !b.Failed {
					t.Fatalf("build = %+v, want failed", b)
				}
			}
			comp, errs := s.errors(t, in.ID)
			if comp.Status != store.CompileFailed || comp.FinishedAt == nil || comp.Version != nil {
				t.Errorf("compile = %+v, want failed without a version", comp)
			}
			if len(errs) == 0 || !strings.Contains(string(comp.Errors), c.message) {
				t.Errorf("errors = %s, want one saying %q", comp.Errors, c.message)
			}
			if c.check != nil {
				c.check(t, errs)
			}
			if vs, err := s.st.ListVersions(context.Background(), s.env.ID, 10); err != nil || len(vs) != 0 {
				t.Errorf("versions = %+v %v, want none", vs, err)
			}
		})
	}
}
