package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/apiclient"
	"github.com/intendhq/intend/internal/server"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startServer runs a whole `intend server` against a fresh database and
// the shared Temporal dev server.
func startServer(t *testing.T) (*apiclient.Client, *server.Server) {
	t.Helper()
	_, hostPort, namespace := testenv.Temporal(t)
	ctx := context.Background()
	s, err := server.Start(ctx, server.Config{
		Listen: "127.0.0.1:0", DatabaseURL: testenv.Database(t),
		TemporalAddress: hostPort, TemporalNamespace: namespace,
		EmbeddedExecutor: true, ReconcileEvery: time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return apiclient.New("http://" + s.Addr()), s
}

type res struct {
	ID         string         `json:"id"`
	Attributes map[string]any `json:"attributes"`
	Requires   []string       `json:"requires,omitempty"`
	Purged     bool           `json:"purged,omitempty"`
}

func file(path, content, mode string, requires ...string) res {
	attrs := map[string]any{"path": path}
	if content != "" || mode != "" {
		attrs["content"] = content
		attrs["mode"] = mode
	}
	return res{ID: fmt.Sprintf("fs::File[localhost,path=%s]", path), Attributes: attrs, Requires: requires}
}

func body(t *testing.T, rs ...res) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"resources": rs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deploy exports and releases a version and waits for its run to finish.
func deploy(t *testing.T, c *apiclient.Client, env string, b []byte) store.DeployRun {
	t.Helper()
	ctx := context.Background()
	v, err := c.ExportVersion(ctx, env, b)
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	rel, err := c.Release(ctx, env, v.Version)
	if err != nil {
		t.Fatalf("release %d: %v", v.Version, err)
	}
	if rel.Run == nil {
		t.Fatalf("release %d requested no deploy run", v.Version)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := c.Run(ctx, env, rel.Run.Run)
		if err != nil {
			t.Fatalf("get run: %v", err)
		}
		if r.Status == "done" || r.Status == "failed" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d still %s after 60s: %+v", r.Run, r.Status, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) (string, os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), st.Mode().Perm()
}

func getResource(t *testing.T, c *apiclient.Client, env, rid string) (store.ResourceState, []store.Action) {
	t.Helper()
	var out struct {
		store.ResourceState
		Actions []store.Action `json:"actions"`
	}
	if err := c.Do(context.Background(), http.MethodGet,
		"/api/v1/environments/"+env+"/resources/"+url.PathEscape(rid), nil, &out); err != nil {
		t.Fatalf("get resource %s: %v", rid, err)
	}
	return out.ResourceState, out.Actions
}

// TestDeployThroughTemporal is the first deploy end to end: REST API →
// PostgreSQL → deploy workflow → executor activity → files on disk →
// states and action records in PostgreSQL; then a second version that
// changes one file, purges one and breaks one.
func TestDeployThroughTemporal(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := testenv.UniqueName(t, "e2e")
	if _, err := c.EnsureProject(ctx, "p-"+env); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureEnvironment(ctx, "p-"+env, env); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "a.txt")
	b := filepath.Join(dir, "sub", "b.txt")
	gone := filepath.Join(dir, "gone.txt")
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, []byte("a file where a directory is needed"), 0o644); err != nil {
		t.Fatal(err)
	}
	aID := file(a, "", "").ID

	run := deploy(t, c, env, body(t,
		file(a, "alpha\n", "0644"),
		file(b, "beta\n", "0600", aID),
		file(gone, "soon gone\n", "0644"),
	))
	if run.Total != 3 || run.Deployed != 3 || run.Failed != 0 {
		t.Fatalf("run 1 = %+v, want 3 of 3 deployed", run)
	}
	if got, mode := readFile(t, a); got != "alpha\n" || mode != 0o644 {
		t.Errorf("a.txt = %q %v", got, mode)
	}
	if got, mode := readFile(t, b); got != "beta\n" || mode != 0o600 {
		t.Errorf("b.txt = %q %v", got, mode)
	}
	st, acts := getResource(t, c, env, file(b, "", "").ID)
	if st.LastResult != "deployed" || st.Compliance != "compliant" || st.DeployedHash != st.IntentHash {
		t.Errorf("b state = %+v", st)
	}
	if len(acts) != 1 || acts[0].Result != "deployed" || acts[0].Reason != "new version 1" ||
		!strings.HasPrefix(acts[0].WorkflowID, "env/"+env+"/deploy/") || acts[0].RunID == "" {
		t.Fatalf("b actions = %+v", acts)
	}
	if !strings.Contains(string(acts[0].Changes), `"content"`) || !strings.Contains(string(acts[0].Logs), "wrote") {
		t.Errorf("b action lacks changes or adapter logs: changes=%s logs=%s", acts[0].Changes, acts[0].Logs)
	}

	// Version 2: a changes, gone is purged, b is unchanged, and c cannot
	// be written (its parent is a regular file).
	cPath := filepath.Join(blocker, "c.txt")
	p := file(gone, "", "")
	p.Purged = true
	// d, on another agent, requires c: it is skipped, not attempted.
	dPath := filepath.Join(dir, "d.txt")
	d := file(dPath, "needs c\n", "0644", file(cPath, "", "").ID)
	d.ID = strings.Replace(d.ID, "[localhost,", "[other,", 1)
	run = deploy(t, c, env, body(t,
		file(a, "alpha v2\n", "0640"),
		file(b, "beta\n", "0600", aID),
		p,
		file(cPath, "never\n", "0644"),
		d,
	))
	if run.Total != 4 || run.Deployed != 2 || run.Failed != 1 || run.Skipped != 1 {
		t.Fatalf("run 2 = %+v, want 4 planned: 2 deployed (a, gone), 1 failed (c), 1 skipped (d); b untouched", run)
	}
	if _, err := os.Stat(dPath); !os.IsNotExist(err) {
		t.Errorf("d was written although c failed: %v", err)
	}
	if st, acts := getResource(t, c, env, d.ID); st.LastResult != "skipped_for_dependency" || len(acts) != 1 ||
		acts[0].Error == nil || !strings.Contains(*acts[0].Error, "c.txt") {
		t.Errorf("d = %+v %+v, want skipped_for_dependency naming c", st, acts)
	}
	if got, mode := readFile(t, a); got != "alpha v2\n" || mode != 0o640 {
		t.Errorf("a.txt after v2 = %q %v", got, mode)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("gone.txt still exists after purge: %v", err)
	}
	if _, acts := getResource(t, c, env, file(b, "", "").ID); len(acts) != 1 {
		t.Errorf("unchanged b was attempted again: %d actions", len(acts))
	}
	st, acts = getResource(t, c, env, file(cPath, "", "").ID)
	if st.LastResult != "failed" || st.Compliance != "non_compliant" {
		t.Errorf("c state = %+v, want failed/non_compliant", st)
	}
	if len(acts) != 1 || acts[0].Error == nil || !strings.Contains(*acts[0].Error, "blocker") {
		t.Errorf("c action should name the failing path: %+v", acts)
	}

	// /metrics has intend's own metrics and the Temporal SDK's.
	resp, err := http.Get(c.Base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`intend_resource_actions_total{action="deploy",environment="` + env + `",result="deployed"} 5`,
		`intend_resource_actions_total{action="deploy",environment="` + env + `",result="failed"} 1`,
		`intend_executor_batch_resources_count`,
		`temporal_workflow_completed_total`,
		`temporal_activity_execution_latency_seconds_bucket`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The list endpoint filters by state.
	failed, _, err := c.Resources(ctx, env, url.Values{"result": {"failed"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].ResourceID != file(cPath, "", "").ID {
		t.Errorf("failed resources = %+v", failed)
	}
}

// TestReleaseStartsMissedRuns: a run recorded in PostgreSQL whose workflow
// was never started (the server died between commit and start) is started
// by the reconciler.
func TestReleaseStartsMissedRuns(t *testing.T) {
	c, s := startServer(t)
	ctx := context.Background()
	env := testenv.UniqueName(t, "rec")
	if _, err := c.EnsureProject(ctx, "p-"+env); err != nil {
		t.Fatal(err)
	}
	e, err := c.EnsureEnvironment(ctx, "p-"+env, env)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	b := body(t, file(path, "x\n", "0644"))
	v, err := c.ExportVersion(ctx, env, b)
	if err != nil {
		t.Fatal(err)
	}
	// Release through the store only: no workflow is started.
	rel, err := s.Store().ReleaseVersion(ctx, e.ID, v.Version)
	if err != nil || rel.Run == nil {
		t.Fatalf("release: %v %+v", err, rel)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.Run(ctx, env, rel.Run.Run)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reconciler did not run the missed deploy: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, _ := readFile(t, path); got != "x\n" {
		t.Errorf("file = %q", got)
	}
}
