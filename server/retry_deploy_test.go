package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestTransientFailureRetriedWithinTheRun: a command that fails once (a
// transient error) is tried again by the same deploy run after the
// retry_backoff, before the next level, so the file that requires it is
// deployed in that run too.
func TestTransientFailureRetriedWithinTheRun(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "retry", map[string]any{"deploy_interval": 0, "repair_interval": 0,
		"retry_attempts": 2, "retry_backoff": 1})
	dir := t.TempDir()
	cmd := res{ID: "exec::Command[other,name=flaky]", Attributes: map[string]any{
		"name": "flaky",
		// Fails the first time it runs, succeeds the second.
		"command": `n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ "$n" -ge 1 ] && touch done`,
		"cwd":     dir,
		"creates": filepath.Join(dir, "done"),
	}}
	// On another agent, so the file is a level after the command.
	f := file(filepath.Join(dir, "after"), "after\n", "0644", cmd.ID)
	run := deploy(t, c, env, body(t, cmd, f))
	if run.Status != "done" || run.Deployed != 2 || run.Failed != 0 || run.Skipped != 0 {
		t.Fatalf("run = %+v, want both deployed in one run after a retry", run)
	}
	if got, _ := readFile(t, filepath.Join(dir, "after")); got != "after\n" {
		t.Fatalf("the dependent file holds %q", got)
	}
	_, acts := getResource(t, c, env, cmd.ID)
	if len(acts) != 2 || acts[1].Result != "failed" || acts[1].ErrorClass == nil || *acts[1].ErrorClass != "transient" ||
		acts[0].Result != "deployed" || acts[0].WorkflowID != acts[1].WorkflowID {
		t.Fatalf("actions %+v; want a transient failure then a success, in one run", acts)
	}
}

// TestReloadOnEvent: a refresh_only command that receives events runs when
// the file it requires (which sends events) changes, and not otherwise.
func TestReloadOnEvent(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "reload", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	conf := filepath.Join(dir, "app.conf")
	version := func(content string) []byte {
		f := file(conf, content, "0644")
		f.SendEvent = true
		reload := res{ID: "exec::Command[localhost,name=reload-app]", Requires: []string{f.ID}, ReceiveEvents: true,
			Attributes: map[string]any{"name": "reload-app", "command": "echo reloaded >> reloads",
				"cwd": dir, "refresh_only": true}}
		return body(t, f, reload)
	}
	reloads := func() int {
		b, err := os.ReadFile(filepath.Join(dir, "reloads"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Count(string(b), "reloaded\n")
	}
	// The file's change queues a repair of the command ("event from
	// ..."), which runs after the release's run: wait for it.
	waitReloads := func(want int) int {
		wait.For(t, fmt.Sprintf("the command to have run %d times", want), 30*time.Second, func() error {
			got := reloads()
			return wait.Unless(got >= want, "the command ran %d times, want %d", got, want)
		})
		time.Sleep(2 * time.Second) // and see that no more come
		return reloads()
	}
	for i, step := range []struct {
		content string
		want    int
	}{{"v1\n", 1}, {"v2\n", 2}} {
		run := deploy(t, c, env, version(step.content))
		if run.Failed != 0 {
			t.Fatalf("step %d: run %+v", i, run)
		}
		if got := waitReloads(step.want); got != step.want {
			t.Fatalf("step %d (content %q): the command ran %d times in all, want %d", i, step.content, got, step.want)
		}
	}
	// A user repair re-verifies both; the file is as intended, so no event
	// and no reload.
	ctx := context.Background()
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.WaitRequest(ctx, env, req.ID, 30*time.Second, nil)
	if err != nil || run.Action != "repair" || run.Deployed != 2 {
		t.Fatalf("repair run %+v, %v", run, err)
	}
	if got := waitReloads(2); got != 2 {
		t.Fatalf("after a repair that changed nothing the command ran %d times in all, want 2", got)
	}
}
