package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
)

// TestConfinedResourcesNeverRun: with allowed_paths and allowed_commands
// set by a global admin after a version was exported, the embedded
// executor is never handed what lies outside them. Deploying the version
// records a file outside the prefix (and one in a sibling directory that
// merely shares its letters, alpha-evil) and a command not allowed as
// failed, naming the setting, and none of them touches the machine: the
// file keeps its content, the sibling directory is not made, the command
// leaves no trace. A resource requiring a refused one is skipped, the
// allowed one deployed. A dry-run of the version, first, does not read
// the file outside: its content appears nowhere in the report.
func TestConfinedResourcesNeverRun(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "confine", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	alpha := filepath.Join(dir, "alpha")
	if err := os.Mkdir(alpha, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("TOP SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(alpha, "command-ran")
	ok, outside, evil := file(filepath.Join(alpha, "ok"), "ok\n", "0644"), file(secret, "overwritten\n", "0644"),
		file(filepath.Join(dir, "alpha-evil", "x"), "x\n", "0644")
	after := file(filepath.Join(alpha, "after"), "after\n", "0644", outside.ID)
	cmd := res{ID: "exec::Command[localhost,name=leave-a-trace]", Attributes: map[string]any{
		"name": "leave-a-trace", "command": []string{touch, trace}, "creates": trace,
	}}
	// A first version makes the embedded executor serve the agent.
	if run := deploy(t, c, env, body(t, ok)); run.Deployed != 1 {
		t.Fatalf("version 1 = %+v", run)
	}
	// Exported while the environment is not confined (or by a path that
	// bypasses the API): the check that holds is when a batch is handed
	// out.
	v, err := c.ExportVersion(ctx, env, body(t, ok, outside, evil, after, cmd))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPatch, "/api/v1/environments/"+env, map[string]any{"settings": map[string]any{
		"allowed_paths": []string{alpha}, "allowed_commands": []string{"/bin/true"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// A dry-run of the version obeys the same confinement: it does not
	// read the file.
	var dr client.DeployRun
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{"version": v.Version}, &dr); err != nil {
		t.Fatal(err)
	}
	report := waitDryrun(t, c, env, dr.Run)
	raw, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "TOP SECRET") {
		t.Errorf("the dry-run read the file outside allowed_paths: %s", raw)
	}
	found := false
	for _, r := range report.Results {
		if r.ResourceID == outside.ID {
			found = r.Error != nil && strings.Contains(*r.Error, "is outside the environment's allowed_paths")
		}
	}
	if !found {
		t.Errorf("the dry-run's result of the file outside does not name allowed_paths: %s", raw)
	}
	if _, err := os.Stat(trace); !os.IsNotExist(err) {
		t.Errorf("the command outside allowed_commands ran: %v", err)
	}

	rel, err := c.Release(ctx, env, v.Version)
	if err != nil || rel.Request == nil {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	run, err := c.WaitRequest(ctx, env, rel.Request.ID, 60*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Total != 4 || run.Failed != 3 || run.Skipped != 1 {
		t.Errorf("run = %+v, want 3 failed (outside), 1 skipped (requires one outside)", run)
	}
	if got, _ := readFile(t, secret); got != "TOP SECRET\n" {
		t.Errorf("the file outside allowed_paths was written: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "alpha-evil")); !os.IsNotExist(err) {
		t.Errorf("alpha-evil, a sibling of the allowed alpha, was made: %v", err)
	}
	if _, err := os.Stat(trace); !os.IsNotExist(err) {
		t.Errorf("the command outside allowed_commands ran: %v", err)
	}
	if got, _ := readFile(t, filepath.Join(alpha, "ok")); got != "ok\n" {
		t.Errorf("the file inside allowed_paths = %q, want it deployed", got)
	}
	for rid, want := range map[string]string{
		outside.ID: "path " + secret + " is outside the environment's allowed_paths [" + alpha + "]",
		evil.ID:    "path " + filepath.Join(dir, "alpha-evil", "x") + " is outside the environment's allowed_paths [" + alpha + "]",
		cmd.ID:     "command program " + touch + " is not in the environment's allowed_commands [/bin/true]",
	} {
		st, acts := getResource(t, c, env, rid)
		// Newest first: the deploy's, then the dry-run's.
		if st.LastResult != "failed" || len(acts) != 2 || acts[0].Action != "deploy" || acts[0].Error == nil || *acts[0].Error != want ||
			acts[0].ErrorClass == nil || *acts[0].ErrorClass != "permanent" {
			t.Errorf("%s: state %+v, actions %+v; want failed (permanent): %q", rid, st, acts, want)
		}
	}
	if st, _ := getResource(t, c, env, after.ID); st.LastResult != "skipped_for_dependency" {
		t.Errorf("a resource requiring one outside: %+v, want skipped_for_dependency", st)
	}
}
