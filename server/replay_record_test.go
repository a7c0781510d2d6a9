package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

// The scheduler's and the compile workflows' committed histories
// (workflows/testdata/scheduler_*.json, compile_*.json, replayed by
// workflows.TestReplayCommittedHistories) are recorded here, from a real
// server, Temporal dev server and PostgreSQL. Each test replays what it
// recorded against the current code; with the variable named at each
// replayRun set to a file, it also writes the history there:
//
//	INTEND_RECORD_SCHEDULER_HISTORY=$PWD/../workflows/testdata/scheduler_lifecycle.json \
//	INTEND_RECORD_SCHEDULER_CONTINUED_HISTORY=$PWD/../workflows/testdata/scheduler_continued.json \
//	INTEND_RECORD_COMPILE_QUEUE_HISTORY=$PWD/../workflows/testdata/compile_queue.json \
//	INTEND_RECORD_COMPILE_HISTORY=$PWD/../workflows/testdata/compile_released.json \
//	INTEND_RECORD_COMPILE_FAILED_HISTORY=$PWD/../workflows/testdata/compile_failed.json \
//	INTEND_RECORD_COMPILE_FETCH_FAILED_HISTORY=$PWD/../workflows/testdata/compile_fetch_failed.json \
//	  CI=1 go test -count=1 -run 'TestSchedulerHistory|TestCompileHistories' ./server/

// replayRun replays one run of a workflow (runID "": the latest) with the
// current code, and writes its history to the file recordVar names, if set.
func replayRun(t *testing.T, srv *server.Server, wfID, runID, recordVar string, register func(worker.WorkflowReplayer)) {
	t.Helper()
	ctx := context.Background()
	var h historypb.History
	it := srv.Temporal().GetWorkflowHistory(ctx, wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	register(r)
	if err := r.ReplayWorkflowHistory(nil, &h); err != nil {
		t.Errorf("replay %s %s (%d events): %v", wfID, runID, len(h.Events), err)
	}
	if file := os.Getenv(recordVar); file != "" {
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// patchSettings changes some of an environment's settings (the API wakes
// its scheduler).
func patchSettings(t *testing.T, c *client.Client, env string, settings map[string]any) {
	t.Helper()
	if err := c.Do(context.Background(), http.MethodPatch, "/api/v1/environments/"+env,
		map[string]any{"settings": settings}, nil); err != nil {
		t.Fatal(err)
	}
}

// waitRunStatus waits until a workflow's latest run has the status.
func waitRunStatus(t *testing.T, srv *server.Server, wfID string, want enumspb.WorkflowExecutionStatus) string {
	t.Helper()
	var runID string
	wait.For(t, wfID+" to be "+want.String(), 60*time.Second, func() error {
		d, err := srv.Temporal().DescribeWorkflowExecution(context.Background(), wfID, "")
		if err != nil {
			return err
		}
		st := d.GetWorkflowExecutionInfo().GetStatus()
		runID = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		return wait.Unless(st == want, "%s: %v, want %v", wfID, st, want)
	})
	return runID
}

// waitSleeping waits until a workflow run's last event is a timer started
// and every child it started has ended: it sleeps until the timer or a
// signal.
func waitSleeping(t *testing.T, srv *server.Server, wfID, runID string) {
	t.Helper()
	wait.For(t, wfID+" to sleep on a timer", 30*time.Second, func() error {
		it := srv.Temporal().GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var last enumspb.EventType
		children := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			switch last = ev.GetEventType(); last {
			case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
				children++
			case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
				children--
			}
		}
		return wait.Unless(last == enumspb.EVENT_TYPE_TIMER_STARTED && children == 0,
			"%s: last event %v, %d children running", wfID, last, children)
	})
}

// historyHas says whether a workflow run's history has an event of the type.
func historyHas(t *testing.T, srv *server.Server, wfID, runID string, typ enumspb.EventType) bool {
	t.Helper()
	it := srv.Temporal().GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == typ {
			return true
		}
	}
	return false
}

// TestSchedulerHistory records an environment's scheduler through its
// paths: a fresh start (adopt), releases (wake), a failure deployed again
// by the retry timer, a repair by the repair timer, a user repair, a
// repair-only run preempted by a release, a halt and a resume, and a
// continue-as-new (Renew); then the continued run (woken, one release)
// until the environment is stopped.
func TestSchedulerHistory(t *testing.T) {
	// The poll at its default (60 s): the wake-ups and the timers drive
	// the scheduler, and its history holds no idle takes.
	c, srv, _ := startValidated(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second})
	ctx := context.Background()
	env := newEnv(t, c, "schedhist", map[string]any{"deploy_interval": 1, "repair_interval": 0,
		"autostart_agents": []string{"localhost"}, "agent_timeout": 1})
	wfID := workflows.SchedulerWorkflowID(env)
	firstRun := waitRunStatus(t, srv, wfID, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)

	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.txt")
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(blocker, "bad.txt")
	// A release: one deployed, one failed.
	if run := deploy(t, c, env, body(t, file(ok, "ok\n", "0644"), file(bad, "bad\n", "0644"))); run.Deployed != 1 || run.Failed != 1 {
		t.Fatalf("first run = %+v", run)
	}
	// The retry timer (deploy_interval 1 s) deploys it once fixed.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the retry and repair timers", 30*time.Second, func() error {
		st, acts := getResource(t, c, env, file(bad, "", "").ID)
		return wait.Unless(st.LastResult == "deployed" && acts[0].Reason == "retry interval", "bad.txt: %+v", st)
	})
	// The repair timer.
	patchSettings(t, c, env, map[string]any{"deploy_interval": 0, "repair_interval": 1})
	wait.For(t, "the recorded run to get there", 30*time.Second, func() error {
		_, acts := getResource(t, c, env, file(ok, "", "").ID)
		return wait.Unless(acts[0].Action == "repair" && acts[0].Reason == "repair interval", "ok.txt: %+v", acts[0])
	})
	patchSettings(t, c, env, map[string]any{"repair_interval": 0})
	// A user repair.
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	if run, err := c.WaitRequest(ctx, env, req.ID, 30*time.Second, nil); err != nil || run.Action != "repair" {
		t.Fatalf("user repair: %+v %v", run, err)
	}

	// A resource no executor serves: its batch waits agent_timeout (1 s).
	far := file(filepath.Join(dir, "far.txt"), "far\n", "0644")
	far.ID = strings.Replace(far.ID, "[localhost,", "[nowhere,", 1)
	if run := deploy(t, c, env, body(t, file(ok, "ok\n", "0644"), file(bad, "bad\n", "0644"), far)); run.Unavailable != 1 {
		t.Fatalf("run with an unserved agent = %+v", run)
	}
	// A repair-only run waiting for it (agent_timeout 6 s now) is
	// preempted by a release (of a version exported before, so the
	// release is one quick request).
	patchSettings(t, c, env, map[string]any{"agent_timeout": 6})
	v3, err := c.ExportVersion(ctx, env, body(t, file(ok, "ok again\n", "0644"), file(bad, "bad\n", "0644")))
	if err != nil {
		t.Fatal(err)
	}
	req, err = c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	var repairRun int64
	wait.For(t, "the recorded run to get there", 30*time.Second, func() error {
		r, err := c.Request(ctx, env, req.ID)
		if err != nil || r.Run == nil {
			return fmt.Errorf("repair request %+v %v: no run", r, err)
		}
		repairRun = *r.Run
		return nil
	})
	rel, err := c.Release(ctx, env, v3.Version)
	if err != nil {
		t.Fatal(err)
	}
	// (The release's request may be taken by the preempted run's
	// successor together with the repair's: its run is not asserted.)
	if _, err := c.WaitRequest(ctx, env, rel.Request.ID, 60*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	waitContent(t, ok, "ok again\n")
	if r, err := c.Run(ctx, env, repairRun); err != nil || r.Status != "preempted" {
		t.Fatalf("repair run %d = %+v %v, want preempted", repairRun, r, err)
	}
	// A halt and a resume.
	for _, op := range []string{"halt", "resume"} {
		if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/"+op, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	req, err = c.Deploy(ctx, env, "incremental")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRequest(ctx, env, req.ID, 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}

	// Renew: the scheduler continues as new once idle.
	if err := srv.Temporal().SignalWorkflow(ctx, wfID, "", workflows.WakeSignal,
		workflows.Wake{Reason: "renew: test", Renew: true}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the recorded run to get there", 30*time.Second, func() error {
		d, err := srv.Temporal().DescribeWorkflowExecution(ctx, wfID, firstRun)
		if err != nil {
			return err
		}
		st := d.GetWorkflowExecutionInfo().GetStatus()
		return wait.Unless(st == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, "first run: %v", st)
	})
	// The continued run deploys a release, and ends when the environment
	// stops (Schedulers.Stop terminates it).
	if run := deploy(t, c, env, body(t, file(ok, "ok at last\n", "0644"), file(bad, "bad\n", "0644"))); run.Deployed < 1 {
		t.Fatalf("run of the continued scheduler = %+v", run)
	}
	// The continued run is named by its ID: once it is terminated, the
	// reconciler (every second here) starts a fresh scheduler for the
	// environment, which would be "the latest run".
	d, err := srv.Temporal().DescribeWorkflowExecution(ctx, wfID, "")
	if err != nil {
		t.Fatal(err)
	}
	continued := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if continued == firstRun {
		t.Fatalf("the latest run is still the first one (%s)", firstRun)
	}
	if err := srv.Temporal().TerminateWorkflow(ctx, wfID, continued, "environment stopped: deleted, cleared or decommissioned"); err != nil {
		t.Fatal(err)
	}

	register := func(r worker.WorkflowReplayer) { workflows.Register(r) }
	replayRun(t, srv, wfID, firstRun, "INTEND_RECORD_SCHEDULER_HISTORY", register)
	replayRun(t, srv, wfID, continued, "INTEND_RECORD_SCHEDULER_CONTINUED_HISTORY", register)
}

// TestCompileHistories records an environment's compile queue through
// its paths (the recompile_interval timer, requests, the timer turned
// off: the queue ends) and three compiles: one that exports and releases
// a version, one whose model does not compile, one whose fetch fails.
func TestCompileHistories(t *testing.T) {
	c, srv := startCompileServer(t)
	repo := newModelRepo(t)
	site := filepath.Join(t.TempDir(), "site")
	repo.push(siteResources(site, "hello\n"))
	env := newEnv(t, c, "compilehist", map[string]any{"repo_url": repo.Bare, "recompile_interval": 1})
	queueID := workflows.CompileQueueWorkflowID(env)
	queueRun := waitRunStatus(t, srv, queueID, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)

	// The timer compiles the branch: a version exported and released;
	// when it fires again, the unchanged branch exports nothing.
	var released client.Compile
	wait.For(t, "the recorded run to get there", 60*time.Second, func() error {
		all, _ := listCompiles(t, c, env, "")
		n := 0
		for _, x := range all {
			if x.Reason == "schedule" && x.Status == "succeeded" {
				n++
				if x.Exported != nil && *x.Exported && x.Released != nil && *x.Released {
					released = x
				}
			}
		}
		return wait.Unless(n >= 2 && released.ID != 0 && historyHas(t, srv, queueID, queueRun, enumspb.EVENT_TYPE_TIMER_FIRED),
			"compiles %+v, want two scheduled, one that released a version, and the timer fired", all)
	})
	waitContent(t, filepath.Join(site, "motd"), "hello\n")
	patchSettings(t, c, env, map[string]any{"recompile_interval": 3600})

	// A broken commit, compiled on request: failed, nothing exported.
	repo.push(`	motd: fs.#File & {path: "/tmp/x", content: 42}
`)
	broken := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if broken.Status != "failed" || broken.Commit == "" || broken.Version != nil {
		t.Fatalf("broken compile = %+v", broken)
	}
	// A repository that does not exist: the fetch fails.
	patchSettings(t, c, env, map[string]any{"repo_url": filepath.Join(t.TempDir(), "nothing.git")})
	unfetched := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if unfetched.Status != "failed" || unfetched.Commit != "" {
		t.Fatalf("compile of a missing repository = %+v", unfetched)
	}
	// The timer off, the queue (kept running by its timer until now, so
	// the request reaches this run) compiles the request and, with
	// nothing queued and no timer, ends. The setting changes once the
	// queue sleeps again: the take after the compile would see it and end
	// the run before the request.
	waitSleeping(t, srv, queueID, queueRun)
	patchSettings(t, c, env, map[string]any{"recompile_interval": 0})
	if last := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second); last.Status != "failed" {
		t.Fatalf("last compile = %+v", last)
	}
	if run := waitRunStatus(t, srv, queueID, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED); run != queueRun {
		t.Fatalf("compile queue run %s completed, want %s (one run for the whole test)", run, queueRun)
	}

	register := func(r worker.WorkflowReplayer) { workflows.RegisterCompile(r) }
	replayRun(t, srv, queueID, queueRun, "INTEND_RECORD_COMPILE_QUEUE_HISTORY", register)
	replayRun(t, srv, released.WorkflowID, "", "INTEND_RECORD_COMPILE_HISTORY", register)
	replayRun(t, srv, broken.WorkflowID, "", "INTEND_RECORD_COMPILE_FAILED_HISTORY", register)
	replayRun(t, srv, unfetched.WorkflowID, "", "INTEND_RECORD_COMPILE_FETCH_FAILED_HISTORY", register)
}
