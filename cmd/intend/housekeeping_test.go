package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestCLIHousekeeping drives the housekeeping commands against a real
// server: projects shown, renamed and (not) deleted, a version deleted,
// protection refusing clear and decommission, clear, and decommission
// with its progress on standard error removing what was deployed.
func TestCLIHousekeeping(t *testing.T) {
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	env := testenv.UniqueName(t, "hk")
	project := "p-" + env
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}
	withEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": env}
	ok(t, vars, "env", "create", env, "--project", project, "--set", "deploy_interval=0")

	if out := ok(t, vars, "project", "show", project); field(t, out, "name") != project {
		t.Errorf("project show:\n%s", out)
	}
	if out := ok(t, vars, "project", "rename", project, project+"-x"); field(t, out, "name") != project+"-x" {
		t.Errorf("project rename:\n%s", out)
	}
	rowOf(t, ok(t, vars, "project", "list"), project+"-x")
	fails(t, vars, exitFailed, []string{"Conflict (409)", "holds 1 environment(s) (" + env + ")"},
		"project", "delete", project+"-x", "--yes")

	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	doc := `{"resources":[{"id":"fs::File[localhost,path=` + path + `]","attributes":{"path":"` + path + `","content":"x"}}]}`
	for range 2 {
		if _, err := c.ExportVersion(ctx, env, []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	if out := ok(t, withEnv, "versions", "delete", "1", "--yes"); !strings.Contains(out, "deleted version 1 of "+env) {
		t.Errorf("versions delete: %s", out)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)", "version 1"}, "versions", "delete", "1", "--yes")
	reqID := servertest.Release(t, c, env, []byte(doc))
	if _, err := c.WaitRequest(ctx, env, reqID, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	fails(t, withEnv, exitFailed, []string{"Conflict (409)", "released version"}, "versions", "delete", "3", "--yes")

	if out := ok(t, vars, "env", "protect", env); !strings.Contains(out, "is protected") {
		t.Errorf("env protect: %s", out)
	}
	if field(t, ok(t, vars, "env", "show", env), "protected") != "yes" {
		t.Error("env show does not say protected")
	}
	for _, op := range []string{"clear", "decommission", "delete"} {
		fails(t, vars, exitFailed, []string{"Conflict (409)", "is protected: it refuses " + op}, "env", op, env, "--yes")
	}
	ok(t, vars, "env", "unprotect", env)

	r := cli(t, vars, "env", "decommission", env, "--yes")
	if r.err != nil || !strings.Contains(r.out, "decommissioned environment "+env) ||
		!strings.Contains(r.stderr, "purging 1 resources (version 4)") {
		t.Fatalf("env decommission: %s", r)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s is still there after decommission: %v", path, err)
	}
	if _, err := c.ExportVersion(ctx, env, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, vars, "env", "clear", env, "--yes"); !strings.Contains(out, "cleared environment "+env+": 1 version,") {
		t.Errorf("env clear: %s", out)
	}
}
