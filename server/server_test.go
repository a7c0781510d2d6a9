package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/intendhq/intend/api/apitest"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// startServer runs a whole `intend server` against a fresh database and
// the shared Temporal dev server.
func startServer(t *testing.T) (*client.Client, *server.Server) {
	t.Helper()
	c, s, _ := startServerDB(t)
	return c, s
}

// startServerDB is startServer that also returns the database URL.
func startServerDB(t *testing.T) (*client.Client, *server.Server, string) {
	t.Helper()
	return startValidated(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second,
	})
}

// startValidated is servertest.StartServer with every request the test
// sends to the API, and every answer, checked against the OpenAPI
// document (apitest.Validating).
func startValidated(t testing.TB, cfg server.Config) (*client.Client, *server.Server, string) {
	t.Helper()
	cfg.WrapHandler = func(h http.Handler) http.Handler { return apitest.Validating(t, h) }
	return servertest.StartServer(t, cfg)
}

type res struct {
	ID            string         `json:"id"`
	Attributes    map[string]any `json:"attributes"`
	Requires      []string       `json:"requires,omitempty"`
	Purged        bool           `json:"purged,omitempty"`
	ReportOnly    bool           `json:"report_only,omitempty"`
	SendEvent     bool           `json:"send_event,omitempty"`
	ReceiveEvents bool           `json:"receive_events,omitempty"`
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
func deploy(t *testing.T, c *client.Client, env string, b []byte) client.DeployRun {
	t.Helper()
	reqID := servertest.Release(t, c, env, b)
	run, err := c.WaitRequest(context.Background(), env, reqID, 60*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	return run
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

func getResource(t *testing.T, c *client.Client, env, rid string) (client.ResourceState, []client.Action) {
	t.Helper()
	var out struct {
		client.ResourceState
		Actions []client.Action `json:"actions"`
	}
	if err := c.Do(context.Background(), http.MethodGet,
		"/api/v1/environments/"+env+"/resources/"+url.PathEscape(rid), nil, &out); err != nil {
		t.Fatalf("get resource %s: %v", rid, err)
	}
	return out.ResourceState, out.Actions
}

// hasFact reports whether facts hold name=value (value as JSON) for rid.
func hasFact(facts []client.Fact, rid, name, value string) bool {
	for _, f := range facts {
		if f.ResourceID == rid && f.Name == name && string(f.Value) == value {
			return true
		}
	}
	return false
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
	var facts struct{ Items []client.Fact }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/resources/"+url.PathEscape(aID)+"/facts",
		nil, &facts); err != nil {
		t.Fatalf("get facts of a: %v", err)
	}
	if !hasFact(facts.Items, aID, "size", "6") {
		t.Errorf("facts of a = %+v, want size 6 (the bytes of \"alpha\\n\")", facts.Items)
	}
	facts.Items = nil
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/facts", nil, &facts); err != nil {
		t.Fatalf("get facts: %v", err)
	}
	if !hasFact(facts.Items, aID, "size", "6") || !hasFact(facts.Items, file(b, "", "").ID, "size", "5") {
		t.Errorf("facts of the environment = %+v, want sizes of a and b", facts.Items)
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
	// The actions of v2 start after this (c's may start before a's: they
	// run in one batch).
	v2Start := time.Now().Truncate(time.Microsecond)
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
	// The run records where its batches spent their time: two agents,
	// two batches, each queued, polled, executed and recorded.
	if st := run.Stages; st == nil {
		t.Errorf("run 2 recorded no stages: %+v", run)
	} else if st.Queued.Count < 2 || st.PollWait.Count < 2 || st.Execute.Count < 2 || st.Record.Count < 2 ||
		st.PollWait.Sum <= 0 || st.Execute.Sum <= 0 || st.Record.Sum <= 0 || st.Execute.Max <= 0 ||
		st.MaxInFlight < 1 || st.HistoryEvents <= 0 || st.Segments != 1 {
		t.Errorf("run 2 stages = %+v, want every batch in every stage, non-zero times, in flight and history", *st)
	}
	// The list of runs leaves the stages out (a run's page has them).
	var listed client.List[client.DeployRun]
	if err := c.Do(context.Background(), http.MethodGet, "/api/v1/environments/"+env+"/runs?limit=5", nil, &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Items) == 0 || listed.Items[0].Run != run.Run || listed.Items[0].Stages != nil {
		t.Errorf("listed runs = %+v, want run %d first and no stages in the list", listed.Items, run.Run)
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

	// The action log filters by resource, action, result and time.
	var page struct {
		Items []client.Action
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/resources/"+url.PathEscape(aID)+"/actions", nil, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || page.Items[0].Reason != "new version 2" || page.Items[1].Reason != "new version 1" {
		t.Errorf("actions of a = %+v, want v2's then v1's", page.Items)
	}
	since := url.QueryEscape(v2Start.Format(time.RFC3339Nano))
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/actions?result=failed&action=deploy&since="+since, nil, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ResourceID != file(cPath, "", "").ID {
		t.Errorf("failed deploys since v2 = %+v, want only c", page.Items)
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/actions?since=yesterday", nil, nil); err == nil ||
		!strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("a bad time should be refused naming the format: %v", err)
	}

	// /metrics has intend's own metrics and the Temporal SDK's.
	resp, err := authGet(c, c.Base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`intend_resource_actions_total{action="deploy",environment="` + env + `",result="deployed"} 5`,
		`intend_resource_actions_total{action="deploy",environment="` + env + `",result="failed"} 1`,
		`intend_executor_batch_resources_count`,
		`intend_resources{compliance="compliant",environment="` + env + `",result="deployed"} 3`,
		`intend_deploy_requests_queued{environment="` + env + `"} 0`,
		`intend_deploy_run_duration_seconds_count{action="deploy",environment="` + env + `",status="done"} 2`,
		`intend_batch_stage_seconds_count{environment="` + env + `",stage="queued"}`,
		`intend_batch_stage_seconds_count{environment="` + env + `",stage="poll_wait"}`,
		`intend_batch_stage_seconds_count{environment="` + env + `",stage="execute"}`,
		`intend_batch_stage_seconds_count{environment="` + env + `",stage="record"}`,
		`intend_executor_batches_in_flight{agent="localhost",environment="` + env + `"} 0`,
		`intend_adapter_call_duration_seconds_count{operation="observe",type="fs::File"}`,
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

// TestSchedulerFindsUnannouncedRequests: a release recorded in PostgreSQL
// whose wake-up never reached the scheduler (the server died between
// commit and signal) is found by the scheduler's poll.
func TestSchedulerFindsUnannouncedRequests(t *testing.T) {
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
	// Release through the store only: nobody wakes the scheduler.
	rel, err := s.Store().ReleaseVersion(ctx, e.ID, v.Version)
	if err != nil || rel.Request == nil {
		t.Fatalf("release: %v %+v", err, rel)
	}
	run, err := c.WaitRequest(ctx, env, rel.Request.ID, 30*time.Second, nil)
	if err != nil || run.Deployed != 1 {
		t.Fatalf("the scheduler did not find the request: %+v %v", run, err)
	}
	if got, _ := readFile(t, path); got != "x\n" {
		t.Errorf("file = %q", got)
	}
}

func newEnv(t *testing.T, c *client.Client, prefix string, settings map[string]any) string {
	t.Helper()
	return servertest.NewEnvironment(t, c, prefix, settings)
}

// TestUserRepairAndRetry: a user repair re-verifies everything (recorded as
// repairs, nothing written); the retry interval deploys a failed resource
// again once its cause is fixed, with no one asking.
func TestUserRepairAndRetry(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "trig", map[string]any{"deploy_interval": 1})
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.txt")
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(blocker, "bad.txt")
	run := deploy(t, c, env, body(t, file(ok, "ok\n", "0644"), file(bad, "bad\n", "0644")))
	if run.Deployed != 1 || run.Failed != 1 {
		t.Fatalf("first run = %+v", run)
	}

	// Fix the cause; the retry interval (1 s) deploys bad.txt by itself.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	var acts []client.Action
	wait.For(t, "bad.txt to be retried", 30*time.Second, func() error {
		var st client.ResourceState
		st, acts = getResource(t, c, env, file(bad, "", "").ID)
		return wait.Unless(st.LastResult == "deployed", "%+v", st)
	})
	if acts[0].Reason != "retry interval" || acts[0].Action != "deploy" {
		t.Errorf("retry action = %+v", acts[0])
	}
	if got, _ := readFile(t, bad); got != "bad\n" {
		t.Errorf("bad.txt = %q", got)
	}

	// A user repair re-verifies both, changing nothing.
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	run, err = c.WaitRequest(ctx, env, req.ID, 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Action != "repair" || run.Deployed != 2 || !strings.Contains(run.Reason, "user repair") {
		t.Errorf("repair run = %+v", run)
	}
	for _, p := range []string{ok, bad} {
		_, acts := getResource(t, c, env, file(p, "", "").ID)
		if acts[0].Action != "repair" || acts[0].Result != "deployed" || len(acts[0].Changes) != 0 {
			t.Errorf("%s: last action = %+v, want a repair that changed nothing", p, acts[0])
		}
	}
	// Drift is repaired.
	if err := os.WriteFile(ok, []byte("drifted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err = c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRequest(ctx, env, req.ID, 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, ok); got != "ok\n" {
		t.Errorf("drift not repaired: %q", got)
	}
}

// TestHaltHoldsReleases: a halted environment starts nothing; resuming
// deploys what was released meanwhile.
func TestHaltHoldsReleases(t *testing.T) {
	c, srv := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "halt", nil)
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/halt", nil, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "held.txt")
	v, err := c.ExportVersion(ctx, env, body(t, file(path, "held\n", "0644")))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c.Release(ctx, env, v.Version)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing may happen while halted: once the scheduler has looked at
	// its queue since the release was queued, the request is still there.
	schedulerLooked(t, srv, env)
	if req, err := c.Request(ctx, env, rel.Request.ID); err != nil || req.Run != nil {
		t.Fatalf("a halted environment took a request: %+v %v", req, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a halted environment deployed: %v", err)
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/resume", nil, nil); err != nil {
		t.Fatal(err)
	}
	run, err := c.WaitRequest(ctx, env, rel.Request.ID, 30*time.Second, nil)
	if err != nil || run.Deployed != 1 {
		t.Fatalf("after resume: %+v %v", run, err)
	}
}

// schedulerLooked waits until env's scheduler has taken requests (its
// TakeRequests activity, which takes every queued request of an
// environment that is not halted into a run) in a pass scheduled after
// this call: a request queued before it has had its chance to be taken.
func schedulerLooked(t *testing.T, srv *server.Server, env string) {
	t.Helper()
	ctx := context.Background()
	tc, id := srv.Temporal(), names.SchedulerWorkflowID(env)
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatalf("scheduler of %s: %v", env, err)
	}
	// The events after mark, and every event of a later run (the
	// scheduler continues as new), came after this call.
	run, mark := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), d.GetWorkflowExecutionInfo().GetHistoryLength()
	wait.For(t, "a pass of the scheduler of "+env, 30*time.Second, func() error {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err
		}
		now, since := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), mark
		if now != run {
			since = 0
		}
		takes := map[int64]bool{}
		it := tc.GetWorkflowHistory(ctx, id, now, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			// The activity's registered name, which histories carry.
			if a := ev.GetActivityTaskScheduledEventAttributes(); ev.GetEventId() > since &&
				a.GetActivityType().GetName() == "intend.TakeRequests" {
				takes[ev.GetEventId()] = true
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && takes[a.GetScheduledEventId()] {
				return nil
			}
		}
		return fmt.Errorf("run %s: %d passes scheduled after event %d, none completed", now, len(takes), since)
	})
}

// TestDependencyRecoveryAndEvents: a resource skipped for its dependency is
// deployed by itself once the dependency is fixed, and a resource with
// receive_events is re-run when a dependency with send_event changes.
func TestDependencyRecoveryAndEvents(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "deps", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dep := file(filepath.Join(blocker, "dep.txt"), "dep\n", "0644")
	dep.SendEvent = true
	user := file(filepath.Join(dir, "user.txt"), "user\n", "0644", dep.ID)
	user.ReceiveEvents = true

	run := deploy(t, c, env, body(t, dep, user))
	if run.Failed != 1 || run.Skipped != 1 {
		t.Fatalf("first run = %+v, want dep failed and user skipped", run)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	// Deploy only dep; user follows because its dependency recovered.
	var req client.Request
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/deploy",
		map[string]any{"mode": "incremental", "resource_ids": []string{dep.ID}}, &req); err != nil {
		t.Fatal(err)
	}
	if run, err := c.WaitRequest(ctx, env, req.ID, 30*time.Second, nil); err != nil || run.Deployed != 1 || run.Total != 1 {
		t.Fatalf("deploy of dep = %+v %v", run, err)
	}
	first := waitAction(t, c, env, user.ID, "dependency "+dep.ID+" recovered", 0)
	if got, _ := readFile(t, filepath.Join(dir, "user.txt")); got != "user\n" {
		t.Errorf("user.txt = %q", got)
	}

	// A change of dep (send_event) re-runs user (receive_events), which
	// itself did not change.
	dep.Attributes["content"] = "dep v2\n"
	deploy(t, c, env, body(t, dep, user))
	a := waitAction(t, c, env, user.ID, "event from "+dep.ID, first.ID)
	if a.Action != "repair" || a.Result != "deployed" {
		t.Errorf("event action = %+v", a)
	}
}

// waitAction waits for a resource's newest action, newer than action id
// after, to give reason (merged runs join the reasons of their requests).
func waitAction(t *testing.T, c *client.Client, env, rid, reason string, after int64) client.Action {
	t.Helper()
	var acts []client.Action
	wait.For(t, rid+": an action "+strconv.Quote(reason), 30*time.Second, func() error {
		_, acts = getResource(t, c, env, rid)
		return wait.Unless(len(acts) > 0 && acts[0].ID > after && strings.Contains(acts[0].Reason, reason), "actions: %+v", acts)
	})
	return acts[0]
}

// TestNoExecutorMeansUnavailable: resources of an agent nobody serves are
// recorded unavailable after agent_timeout, naming the task queue.
func TestNoExecutorMeansUnavailable(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "unav", map[string]any{"autostart_agents": []string{}, "agent_timeout": 1, "deploy_interval": 0})
	r := file(filepath.Join(t.TempDir(), "never.txt"), "x\n", "0644")
	run := deploy(t, c, env, body(t, r))
	if run.Unavailable != 1 || run.Status != "done" {
		t.Fatalf("run = %+v, want 1 unavailable", run)
	}
	st, acts := getResource(t, c, env, r.ID)
	if st.LastResult != "unavailable" || len(acts) != 1 || acts[0].Error == nil ||
		!strings.Contains(*acts[0].Error, "agent/"+env+"/localhost") {
		t.Errorf("state %+v, actions %+v; want unavailable naming the task queue", st, acts)
	}
}

// TestDryrun: a dry-run reports, per resource, what a deploy would do, with
// per-attribute changes, and changes nothing.
func TestDryrun(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "dry", map[string]any{"deploy_interval": 0})
	dir := t.TempDir()
	same, drift, gone, extra := filepath.Join(dir, "same"), filepath.Join(dir, "drift"), filepath.Join(dir, "gone"), filepath.Join(dir, "extra")
	purge := file(extra, "", "")
	purge.Purged = true
	deploy(t, c, env, body(t, file(same, "same\n", "0644"), file(drift, "drift\n", "0644"), file(gone, "gone\n", "0644"), purge))
	// The world drifts: one file changed, one removed, one appeared.
	if err := os.WriteFile(drift, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(extra, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	var run client.DeployRun
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{}, &run); err != nil {
		t.Fatal(err)
	}
	if run.Action != "dryrun" || !strings.Contains(run.WorkflowID, "/dryrun/") {
		t.Fatalf("dry-run = %+v", run)
	}
	out := waitDryrun(t, c, env, run.Run)
	got := map[string]client.DryrunResult{}
	for _, r := range out.Results {
		got[r.ResourceID] = r
	}
	want := map[string]string{file(same, "", "").ID: "unmodified", file(drift, "", "").ID: "modified",
		file(gone, "", "").ID: "added", purge.ID: "deleted"}
	for id, status := range want {
		if got[id].Status != status {
			t.Errorf("%s: status %q, want %q", id, got[id].Status, status)
		}
	}
	if ch := string(got[file(drift, "", "").ID].Changes); !strings.Contains(ch, `"from":"edited\n"`) || !strings.Contains(ch, `"to":"drift\n"`) {
		t.Errorf("drift changes = %s, want content from edited to drift", ch)
	}
	// Nothing changed on disk, and no deploy state moved.
	if b, _ := os.ReadFile(drift); string(b) != "edited\n" {
		t.Errorf("the dry-run wrote drift: %q", b)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the dry-run created gone: %v", err)
	}
	if _, err := os.Stat(extra); err != nil {
		t.Errorf("the dry-run deleted extra: %v", err)
	}
	if st, _ := getResource(t, c, env, file(drift, "", "").ID); st.LastResult != "deployed" || st.Compliance != "compliant" {
		t.Errorf("a dry-run moved deploy state: %+v", st)
	}
}

// TestReportOnly: a report-only resource is observed and diffed, never
// changed; a difference makes it non-compliant with the diff recorded.
func TestReportOnly(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "rep", map[string]any{"deploy_interval": 0})
	path := filepath.Join(t.TempDir(), "watched")
	if err := os.WriteFile(path, []byte("as found\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := file(path, "as intended\n", "0644")
	r.ReportOnly = true
	run := deploy(t, c, env, body(t, r))
	if run.Deployed != 0 || run.Skipped != 1 || run.Failed != 0 {
		t.Errorf("run = %+v, want the report-only resource counted as skipped", run)
	}
	if got, _ := readFile(t, path); got != "as found\n" {
		t.Errorf("a report-only resource was changed: %q", got)
	}
	st, acts := getResource(t, c, env, r.ID)
	if st.LastResult != "skipped" || st.Compliance != "non_compliant" || len(acts) != 1 ||
		!strings.Contains(string(acts[0].Changes), "as intended") {
		t.Errorf("state %+v, actions %+v; want skipped, non-compliant, the diff recorded", st, acts)
	}
}

// TestRepairInterval: drift is repaired by the repair interval, with no
// one asking.
func TestRepairInterval(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "heal", map[string]any{"deploy_interval": 0, "repair_interval": 1})
	path := filepath.Join(t.TempDir(), "healed")
	r := file(path, "intended\n", "0644")
	deploy(t, c, env, body(t, r))
	if err := os.WriteFile(path, []byte("drifted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := waitAction(t, c, env, r.ID, "repair interval", 0)
	if a.Action != "repair" {
		t.Errorf("action = %+v, want a repair", a)
	}
	wait.For(t, "the drift to be repaired", 30*time.Second, func() error {
		got, err := os.ReadFile(path)
		return wait.Unless(string(got) == "intended\n", "%s = %q, %v", path, got, err)
	})
}

// dryrunReport is GET .../dryrun/{id}.
type dryrunReport struct {
	client.DeployRun
	Results []client.DryrunResult
}

// waitDryrun polls a dry-run until it is done and returns its report.
func waitDryrun(t *testing.T, c *client.Client, env string, run int64) dryrunReport {
	t.Helper()
	var out dryrunReport
	wait.For(t, fmt.Sprintf("dry-run %d to be done", run), 30*time.Second, func() error {
		if err := c.Do(context.Background(), http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/dryrun/%d", env, run), nil, &out); err != nil {
			t.Fatal(err)
		}
		return wait.Unless(out.Status == "done", "%+v", out)
	})
	return out
}
