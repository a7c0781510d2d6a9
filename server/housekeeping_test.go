package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// liveInstance uploads lsmFileModel(root) to env, creates instance name
// and waits until it is up; it returns the instance's workflow id.
func liveInstance(t *testing.T, c *client.Client, env, root, name string) string {
	t.Helper()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": name, "memory": 2}})
	if r.status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	inst := waitState(t, c, env, r.instance(t).ID, "up", "rejected", "failed")
	return names.ServiceInstanceWorkflowID(env, "vm", inst.ID)
}

// waitStatus waits until workflow id is in status.
func waitStatus(t *testing.T, s *server.Server, id string, status enumspb.WorkflowExecutionStatus) {
	t.Helper()
	wait.For(t, "workflow "+id+" to be "+status.String(), 30*time.Second, func() error {
		d, err := s.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
		return wait.Unless(err == nil && d.GetWorkflowExecutionInfo().GetStatus() == status,
			"%v %v", d.GetWorkflowExecutionInfo().GetStatus(), err)
	})
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	wait.For(t, path+" to exist", within, func() error {
		_, err := os.Stat(path)
		return err
	})
}

// TestClearWhileLive clears an environment while a service instance's
// workflow lives and a deploy runs a command: the instance's workflow is
// terminated, the instance and catalog are gone, and once the command has
// finished, nothing of the old run comes back (no state, action or
// version); the environment deploys again as before.
func TestClearWhileLive(t *testing.T) {
	c, srv := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "clearlive", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	root := t.TempDir()
	wfID := liveInstance(t, c, env, root, "web")

	dir := t.TempDir()
	started, made := filepath.Join(dir, "started"), filepath.Join(dir, "made")
	slow := res{ID: "exec::Command[localhost,name=slow]", Attributes: map[string]any{
		"name": "slow", "command": `touch "$STARTED"; sleep 3; echo made > "$OUT"`, "cwd": dir,
		"env": map[string]any{"OUT": made, "STARTED": started}, "creates": made, "timeout": 60,
	}}
	reqID := servertest.Release(t, c, env, body(t, slow))
	waitFile(t, started, 60*time.Second)

	out, err := c.ClearEnvironment(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if out.ServiceInstances != 1 || out.Versions < 2 {
		t.Errorf("cleared = %+v, want the instance and at least the model's and the command's versions", out)
	}
	waitStatus(t, srv, wfID, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED)
	if _, err := c.Request(ctx, env, reqID); err == nil {
		t.Errorf("the release's deploy request survived the clear")
	}
	var catalog struct {
		Items []any `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog", &catalog); err != nil || len(catalog.Items) != 0 {
		t.Errorf("the catalog after clear: %v %v", catalog.Items, err)
	}

	// The embedded executor of the cleared environment stops (it has no
	// agents left), interrupting the command; the API's tests have a
	// report that arrives after the clear refused. A new version
	// deploys, and only it is there.
	quick := filepath.Join(dir, "quick")
	run := deploy(t, c, env, body(t, file(quick, "q\n", "0644")))
	if run.Deployed != 1 {
		t.Fatalf("the deploy after clear = %+v", run)
	}
	rs, _, err := c.Resources(ctx, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ResourceID != file(quick, "", "").ID {
		t.Errorf("resources after clear = %+v, want only the new file", rs)
	}
	var page struct {
		Items []client.Action `json:"items"`
	}
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "actions"), nil, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ResourceID != file(quick, "", "").ID {
		t.Errorf("actions after clear = %+v, want only the new file's", page.Items)
	}
	var vs struct {
		Items []client.VersionInfo `json:"items"`
	}
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "versions"), nil, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs.Items) != 1 {
		t.Errorf("versions after clear = %+v, want only the new one", vs.Items)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=2\n" {
		t.Errorf("clear changed what was deployed: web.conf = %q", got)
	}
}

// TestDeleteStopsInstances: deleting an environment terminates its
// service instances' workflows too, not only its scheduler.
func TestDeleteStopsInstances(t *testing.T) {
	c, srv := startServer(t)
	env := newEnv(t, c, "delinst", nil)
	wfID := liveInstance(t, c, env, t.TempDir(), "db")
	if err := c.Do(context.Background(), http.MethodDelete, client.EnvPath(env), nil, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, srv, wfID, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED)
}

// TestDecommission purges everything an environment deployed (files of
// its own version, a file inside a directory it created, a service
// instance's file), then clears it; a protected environment is refused
// first, and nothing is removed.
func TestDecommission(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "decom", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	root := t.TempDir()
	liveInstance(t, c, env, root, "web")
	conf := filepath.Join(root, "web.conf")
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	subDir := res{ID: "fs::Directory[localhost,path=" + sub + "]", Attributes: map[string]any{"path": sub}}
	inSub := file(filepath.Join(sub, "f"), "f\n", "0644", subDir.ID)
	top := file(filepath.Join(dir, "top"), "top\n", "0644")
	if run := deploy(t, c, env, body(t, subDir, inSub, top)); run.Deployed != 3 {
		t.Fatalf("deploy = %+v", run)
	}

	if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "protect"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DecommissionStep(ctx, env); err == nil {
		t.Fatal("a protected environment was decommissioned")
	}
	if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "unprotect"), nil, nil); err != nil {
		t.Fatal(err)
	}
	var runs int
	d, err := c.Decommission(ctx, env, 120*time.Second, func(_ client.Decommission, r *client.DeployRun) {
		if r != nil {
			runs++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "cleared" || d.Cleared == nil || d.Cleared.ServiceInstances != 1 || runs == 0 {
		t.Errorf("decommission = %+v after %d run states", d, runs)
	}
	for _, p := range []string{conf, sub, top.Attributes["path"].(string)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	e, err := c.Environment(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if e.ReleasedVersion != nil || e.DecommissionVersion != nil {
		t.Errorf("after decommission: %+v", e)
	}
}

// TestDecommissionStopsOnWhatCannotBePurged: a resource whose removal
// fails (a file that became a non-empty directory) stops the
// decommission after the purge and one retry, naming it, with nothing
// cleared; once the cause is gone, decommission again goes on and
// clears the environment.
func TestDecommissionStopsOnWhatCannotBePurged(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "decfail", map[string]any{"deploy_interval": 0, "repair_interval": 0, "retry_attempts": 0})
	dir := t.TempDir()
	stuck, fine := filepath.Join(dir, "stuck"), filepath.Join(dir, "fine")
	if run := deploy(t, c, env, body(t, file(stuck, "s\n", "0644"), file(fine, "f\n", "0644"))); run.Deployed != 2 {
		t.Fatalf("deploy = %+v", run)
	}
	if err := os.Remove(stuck); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(stuck, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := c.Decommission(ctx, env, 2*time.Minute, nil)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 resource(s) were not purged") ||
		!strings.Contains(err.Error(), file(stuck, "", "").ID) {
		t.Fatalf("decommission = %+v, %v; want it stopped naming %s", d, err, stuck)
	}
	if _, err := os.Stat(fine); !os.IsNotExist(err) {
		t.Errorf("%s was not purged: %v", fine, err)
	}
	e, err := c.Environment(ctx, env)
	if err != nil || e.DecommissionVersion == nil || e.ReleasedVersion == nil {
		t.Fatalf("the environment was cleared although a resource is left: %+v %v", e, err)
	}
	if err := os.RemoveAll(stuck); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Decommission(ctx, env, 2*time.Minute, nil); err != nil || d.State != "cleared" {
		t.Fatalf("decommission again = %+v, %v", d, err)
	}
}
