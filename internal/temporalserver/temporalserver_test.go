package temporalserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/pgcluster"
)

// GreetInput is greetWorkflow's input.
type GreetInput struct{ Name string }

// GreetOutput is greetWorkflow's result.
type GreetOutput struct{ Greeting string }

const greetSignal = "greeting"

// greetWorkflow waits for a signal carrying a greeting, then has an
// activity put it together with its input's name.
func greetWorkflow(ctx workflow.Context, in GreetInput) (GreetOutput, error) {
	var greeting string
	workflow.GetSignalChannel(ctx, greetSignal).Receive(ctx, &greeting)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out GreetOutput
	err := workflow.ExecuteActivity(ctx, greet, greeting, in.Name).Get(ctx, &out)
	return out, err
}

func greet(_ context.Context, greeting, name string) (GreetOutput, error) {
	return GreetOutput{Greeting: greeting + ", " + name}, nil
}

// binaries returns the server and SQL tool; a missing one fails the test
// (make tools builds them), as a missing PostgreSQL does.
func binaries(t *testing.T) (server, sqlTool string) {
	t.Helper()
	server, err1 := FindServer()
	sqlTool, err2 := FindSQLTool()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("%v: make tools builds them", err)
	}
	return server, sqlTool
}

// TestKilledServerResumesOnSameDatabase runs a workflow through the server,
// kills the server with SIGKILL while the workflow waits for a signal,
// starts it again on the same database and sees the workflow take the
// signal and finish, with the history written before the kill intact.
func TestKilledServerResumesOnSameDatabase(t *testing.T) {
	serverPath, sqlToolPath := binaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	// PostgreSQL runs as user postgres when we are root; it has to reach
	// the cluster below this directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })

	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := Options{
		Logger:      logger,
		ServerPath:  serverPath,
		SQLToolPath: sqlToolPath,
		Postgres:    Postgres{Host: "127.0.0.1", Port: pg.Port(), User: "postgres"},
		Dir:         filepath.Join(dir, "temporal"),
	}
	began := time.Now()
	first, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first start (schemas set up on a new database): %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { _ = first.Kill() })
	checkMetrics(t, first.MetricsURL())

	// The worker has a client of its own: it outlives both servers, as a
	// worker process outlives a restart of the cluster.
	wc, err := client.Dial(client.Options{
		HostPort:  first.HostPort(),
		Namespace: first.Namespace(),
		// Its complaints while the server is down belong to the test's
		// output, shown when it fails.
		Logger: log.NewStructuredLogger(logger),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	const queue = "greet"
	w := worker.New(wc, queue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterActivity(greet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Started at once with one of temporal.yaml's search attributes:
	// Start returns when they are usable, not merely registered.
	env := temporal.NewSearchAttributeKeyKeyword("IntendEnvironment")
	run, err := first.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "greet-1",
		TaskQueue:             queue,
		TypedSearchAttributes: temporal.NewSearchAttributes(env.ValueSet("test")),
	}, greetWorkflow, GreetInput{Name: "PostgreSQL"})
	if err != nil {
		t.Fatal(err)
	}
	// Once its first workflow task has completed, the workflow waits for
	// the signal.
	before := waitForEvent(ctx, t, first.Client(), run, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)

	if err := first.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}

	opts.Ports = first.Ports()
	began = time.Now()
	second, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second start (same database): %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { _ = second.Kill() })
	if second.HostPort() != first.HostPort() {
		t.Errorf("second server at %s, want the first's address %s", second.HostPort(), first.HostPort())
	}

	if err := second.Client().SignalWorkflow(ctx, run.GetID(), run.GetRunID(), greetSignal, "Hello"); err != nil {
		t.Fatal(err)
	}
	var out GreetOutput
	if err := second.Client().GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Greeting != "Hello, PostgreSQL" {
		t.Errorf("greeting = %q, want %q", out.Greeting, "Hello, PostgreSQL")
	}

	after := history(ctx, t, second.Client(), run)
	if len(after) <= len(before) {
		t.Fatalf("history has %d events after the restart, %d before", len(after), len(before))
	}
	for i, e := range before {
		if a := after[i]; a.GetEventId() != e.GetEventId() || a.GetEventType() != e.GetEventType() || !a.GetEventTime().AsTime().Equal(e.GetEventTime().AsTime()) {
			t.Errorf("event %d changed across the restart: %v at %v, was %v at %v", i, a.GetEventType(), a.GetEventTime().AsTime(), e.GetEventType(), e.GetEventTime().AsTime())
		}
	}
	var types []enumspb.EventType
	for _, e := range after[len(before):] {
		types = append(types, e.GetEventType())
	}
	for _, want := range []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED} {
		if !slices.Contains(types, want) {
			t.Errorf("events after the restart %v lack %v", types, want)
		}
	}

	began = time.Now()
	if err := second.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	t.Logf("stop (SIGTERM): %v", time.Since(began).Round(time.Millisecond))
}

// waitForEvent polls the workflow's history until it holds an event of
// type want and returns the history up to that event.
func waitForEvent(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, want enumspb.EventType) []*historypb.HistoryEvent {
	t.Helper()
	for {
		events := history(ctx, t, c, run)
		for i, e := range events {
			if e.GetEventType() == want {
				return events[:i+1]
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %v event in the history of %s: %v", want, run.GetID(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func history(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", run.GetID(), err)
		}
		events = append(events, e)
	}
	return events
}

// checkMetrics reads the server's own Prometheus metrics: a Prometheus
// scrape (intend dev-cluster's) finds the services' request counters.
func checkMetrics(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	if !strings.Contains(string(b), "service_requests") {
		t.Fatalf("GET %s has no service_requests metric:\n%.2000s", url, b)
	}
}
