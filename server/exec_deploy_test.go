package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecCommandDeploy deploys an exec::Command with a creates guard end
// to end (API → PostgreSQL → Temporal → embedded executor): the command
// runs once, its output is in the action log, and later deploys and a
// repair find its guard satisfied and run nothing.
func TestExecCommandDeploy(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "exec", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	made := filepath.Join(dir, "made")
	cmd := func(timeout int) res {
		return res{ID: "exec::Command[localhost,name=make-it]", Attributes: map[string]any{
			"name":    "make-it",
			"command": `echo run >> ran.log; echo made > "$OUT"; echo hello-from-exec; echo warn-from-exec >&2`,
			"cwd":     dir,
			"env":     map[string]any{"OUT": made},
			"creates": made,
			"timeout": timeout,
		}}
	}
	runs := func() int {
		b, err := os.ReadFile(filepath.Join(dir, "ran.log"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("run\n"))
	}

	run := deploy(t, c, env, body(t, cmd(60)))
	if run.Total != 1 || run.Deployed != 1 || run.Failed != 0 {
		t.Fatalf("run 1 = %+v, want the command deployed", run)
	}
	if got, _ := readFile(t, made); got != "made\n" {
		t.Errorf("the command wrote %q, want \"made\\n\"", got)
	}
	st, acts := getResource(t, c, env, cmd(60).ID)
	if st.LastResult != "deployed" || st.Compliance != "compliant" || len(acts) != 1 {
		t.Fatalf("state %+v, actions %+v; want deployed and compliant after one action", st, acts)
	}
	if !strings.Contains(string(acts[0].Changes), `"command"`) {
		t.Errorf("the first action records no create: changes=%s", acts[0].Changes)
	}
	var logs []struct {
		Msg   string         `json:"msg"`
		Attrs map[string]any `json:"attrs"`
	}
	if err := json.Unmarshal(acts[0].Logs, &logs); err != nil {
		t.Fatalf("logs %s: %v", acts[0].Logs, err)
	}
	found := false
	for _, l := range logs {
		if l.Msg == "command exited" {
			found = l.Attrs["stdout"] == "hello-from-exec\n" && l.Attrs["stderr"] == "warn-from-exec\n" &&
				l.Attrs["exit_code"] == float64(0)
		}
	}
	if !found {
		t.Errorf("the action log lacks the command's output and exit code: %s", acts[0].Logs)
	}

	// Version 2 changes only the timeout, so the resource is attempted
	// again: the guard says done, and nothing runs or changes.
	run = deploy(t, c, env, body(t, cmd(120)))
	if run.Total != 1 || run.Deployed != 1 || run.Failed != 0 {
		t.Fatalf("run 2 = %+v, want the command attempted and deployed", run)
	}
	_, acts = getResource(t, c, env, cmd(120).ID)
	if len(acts) != 2 || acts[0].Reason != "new version 2" {
		t.Fatalf("actions = %+v, want version 2's attempt first", acts)
	}
	if len(acts[0].Changes) != 0 || !strings.Contains(string(acts[0].Logs), "nothing to do") ||
		strings.Contains(string(acts[0].Logs), "hello-from-exec") {
		t.Errorf("version 2 changed something: changes=%s logs=%s", acts[0].Changes, acts[0].Logs)
	}

	// A user repair re-verifies it: still nothing runs.
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	if run, err := c.WaitRequest(ctx, env, req.ID, 60*time.Second, nil); err != nil || run.Deployed != 1 {
		t.Fatalf("repair = %+v %v", run, err)
	}
	_, acts = getResource(t, c, env, cmd(120).ID)
	if len(acts) != 3 || acts[0].Action != "repair" || len(acts[0].Changes) != 0 {
		t.Errorf("actions = %+v, want a repair that changed nothing", acts)
	}
	if n := runs(); n != 1 {
		t.Errorf("the command ran %d times over a deploy, a changed version and a repair; want once", n)
	}
}
