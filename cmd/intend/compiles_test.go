package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// git runs git in dir and fails the test on an error.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestCompilesCommands drives the autonomous mode from the CLI: the quick
// start pushed to a bare repository, the environment pointed at it, a
// compile requested and followed, listed and shown; then a broken commit.
func TestCompilesCommands(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second, DataDir: t.TempDir(), AllowLocalRepos: true})
	envName := testenv.UniqueName(t, "compiles")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)

	// Without a repository the request is refused.
	fails(t, vars, exitFailed, []string{"repo_url"}, "compiles", "request")

	work, root := quickstart(t)
	bare := filepath.Join(t.TempDir(), "infra.git")
	git(t, filepath.Dir(bare), "init", "-q", "--bare", "-b", "main", bare)
	git(t, work, "init", "-q", "-b", "main")
	git(t, work, "add", ".")
	git(t, work, "commit", "-q", "-m", "quick start")
	git(t, work, "push", "-q", bare, "main")
	ok(t, vars, "env", "settings", "set", "repo_url="+bare, "repo_branch=main")

	out := ok(t, vars, "compiles", "request", "--wait")
	for _, want := range []string{"status", "succeeded", "env/" + envName + "/compile/1", "1 (released)"} {
		if !strings.Contains(out, want) {
			t.Errorf("compiles request --wait lacks %q:\n%s", want, out)
		}
	}
	var src struct {
		Origin string `json:"origin"`
	}
	if err := c.Do(context.Background(), "GET", client.EnvPath(envName, "model"), nil, &src); err != nil || src.Origin != "compile" {
		t.Errorf("model source after the compile: %+v, %v", src, err)
	}
	out = ok(t, vars, "deploy-now", "--wait")
	if _, err := os.Readlink(filepath.Join(root, "apps", "shop", "current")); err != nil {
		t.Errorf("the compiled version was not deployed: %v\n%s", err, out)
	}

	// A broken commit: the compile fails with the error's file and line,
	// and the command exits 1.
	model := filepath.Join(work, "main.cue")
	b, _ := os.ReadFile(model)
	if err := os.WriteFile(model, []byte(strings.Replace(string(b), "port: 8080", `port: "http"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "commit", "-q", "-am", "break it")
	git(t, work, "push", "-q", bare, "main")
	r := fails(t, vars, exitFailed, []string{"compile 2 failed"}, "compiles", "request", "--wait")
	if !strings.Contains(r.out, "parameter.port") || !strings.Contains(r.out, "main.cue:") {
		t.Errorf("the failed compile's report lacks the error and its position:\n%s", r.out)
	}

	out = ok(t, vars, "compiles", "list")
	if row := rowOf(t, out, "2"); row[1] != "failed" {
		t.Errorf("compiles list row 2 = %v\n%s", row, out)
	}
	if row := rowOf(t, out, "1"); row[1] != "succeeded" {
		t.Errorf("compiles list row 1 = %v\n%s", row, out)
	}
	r = fails(t, vars, exitFailed, []string{"compile 2 failed"}, "compiles", "show", "2", "--json")
	if !strings.Contains(r.out, `"errors"`) {
		t.Errorf("compiles show --json:\n%s", r.out)
	}
}
