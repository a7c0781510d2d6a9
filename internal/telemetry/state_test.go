package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/telemetry"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestStateCollector(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	calls := 0
	src := func(ctx context.Context) (telemetry.State, error) {
		calls++
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > telemetry.StateTimeout {
			t.Errorf("source context deadline %v (set %v), want within %v", dl, ok, telemetry.StateTimeout)
		}
		return telemetry.State{
			Resources: []telemetry.StateCount{
				{Environment: "prod", Compliance: "compliant", Result: "deployed", Count: 7},
				{Environment: "prod", Compliance: "non_compliant", Result: "failed", Count: 2},
				{Environment: "dev", Compliance: "has_update", Result: "new", Count: 3},
			},
			Queued: map[string]int{"prod": 0, "dev": 4},
		}, nil
	}
	if err := tel.Registry.Register(telemetry.NewStateCollector(src, quiet)); err != nil {
		t.Fatal(err)
	}

	resources := series(t, tel, "intend_resources")
	queued := series(t, tel, "intend_deploy_requests_queued")
	cases := []struct {
		reason string
		got    map[string]float64
		key    string
		want   float64
	}{
		{"each (environment, compliance, result) is one gauge", resources,
			"compliance=compliant,environment=prod,result=deployed", 7},
		{"failures are counted apart", resources, "compliance=non_compliant,environment=prod,result=failed", 2},
		{"every environment has its own series", resources, "compliance=has_update,environment=dev,result=new", 3},
		{"queue depth is per environment", queued, "environment=dev", 4},
		{"an empty queue is a zero, not an absent series", queued, "environment=prod", 0},
		{"an empty state is a zero, not an absent series", resources, "compliance=compliant,environment=dev,result=deployed", 0},
		{"every pair of the vocabulary, for every environment", resources,
			"compliance=undefined,environment=prod,result=skipped_for_undefined", 0},
	}
	for _, c := range cases {
		if v, ok := c.got[c.key]; !ok || v != c.want {
			t.Errorf("%s: %s = %v (present %v), want %v", c.reason, c.key, v, ok, c.want)
		}
	}
	if want := 2 * len(telemetry.Compliances) * len(telemetry.Results); len(resources) != want || len(queued) != 2 {
		t.Errorf("%d resources series, queued %v: want %d (2 environments × the vocabulary) and 2",
			len(resources), queued, want)
	}
	if calls != 2 {
		t.Errorf("source called %d times for two gathers, want once per scrape", calls)
	}
}

func TestStateCollectorError(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	boom := errors.New("connection refused")
	src := func(ctx context.Context) (telemetry.State, error) { return telemetry.State{}, boom }
	if err := tel.Registry.Register(telemetry.NewStateCollector(src, quiet)); err != nil {
		t.Fatal(err)
	}
	tel.BatchSize.WithLabelValues("prod").Observe(1)

	families, err := tel.Registry.Gather()
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("gather error = %v, want the source's error reported", err)
	}
	for _, f := range families {
		if n := f.GetName(); n == "intend_resources" || n == "intend_deploy_requests_queued" {
			t.Errorf("%s is served although its source failed: unknown must not read as a value", n)
		}
	}

	// The handler still serves every other metric.
	if code, body := scrape(t, tel); code != http.StatusOK || !strings.Contains(body, "intend_executor_batch_resources_count{environment=\"prod\"} 1") {
		t.Errorf("/metrics answered %d without the other metrics:\n%s", code, body)
	}
}

// TestStateCollectorOneQueryAtATime: concurrent scrapes must not take more
// than one database connection between them.
func TestStateCollectorOneQueryAtATime(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	var inFlight, most atomic.Int32
	const scrapes = 8
	var started sync.WaitGroup
	started.Add(scrapes)
	gate := make(chan struct{})
	src := func(ctx context.Context) (telemetry.State, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-gate
		return telemetry.State{Queued: map[string]int{"prod": 1}}, nil
	}
	if err := tel.Registry.Register(telemetry.NewStateCollector(src, quiet)); err != nil {
		t.Fatal(err)
	}
	var done sync.WaitGroup
	for range scrapes {
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			if _, err := tel.Registry.Gather(); err != nil {
				t.Errorf("gather: %v", err)
			}
		}()
	}
	started.Wait()
	close(gate)
	done.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d queries ran at once, want 1", m)
	}
}

// TestClusterStateCollector: only the replica holding the metrics lock
// exports the database-derived gauges (and queries for them); every
// replica says whether it holds it. Timestamps, compiles and lifecycle
// states read 0 when empty rather than vanishing.
func TestClusterStateCollector(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	var held atomic.Bool
	calls := 0
	deployed := time.Unix(1700000000, 500e6)
	src := func(ctx context.Context) (telemetry.State, error) {
		calls++
		return telemetry.State{
			Queued:               map[string]int{"prod": 0, "dev": 0},
			LastSuccessfulDeploy: map[string]time.Time{"prod": deployed},
			OldestOpenRun:        map[string]time.Time{"dev": deployed},
			Compiles:             []telemetry.CompileCount{{Environment: "prod", Status: "failed", Count: 3, Seconds: 4.5}},
			LSMStates: []telemetry.LSMStateCount{
				{Environment: "prod", Entity: "vpn", State: "creating", Transient: true, Count: 2, OldestChange: &deployed},
				{Environment: "prod", Entity: "vpn", State: "updating", Transient: true},
				{Environment: "prod", Entity: "vpn", State: "up", Count: 5},
			},
			Agents: []telemetry.AgentExecutors{{Environment: "prod", Agent: "web1"}, {Environment: "prod", Agent: "db", Live: 2}},
		}, nil
	}
	if err := tel.Registry.Register(telemetry.NewClusterStateCollector(src, quiet, held.Load)); err != nil {
		t.Fatal(err)
	}
	if got := series(t, tel, "intend_metrics_lock_held"); got[""] != 0 || len(got) != 1 {
		t.Errorf("without the lock: intend_metrics_lock_held = %v, want 0", got)
	}
	if got := series(t, tel, "intend_resources"); len(got) != 0 || calls != 0 {
		t.Errorf("without the lock: intend_resources = %v after %d queries, want none and none", got, calls)
	}

	held.Store(true)
	cases := []struct {
		reason, family, key string
		want                float64
	}{
		{"the holder says so", "intend_metrics_lock_held", "", 1},
		{"the holder exports the state", "intend_resources", "compliance=compliant,environment=dev,result=deployed", 0},
		{"a successful deploy is its end, in seconds", "intend_last_successful_deploy_timestamp_seconds", "environment=prod", 1700000000.5},
		{"never deployed reads 0", "intend_last_successful_deploy_timestamp_seconds", "environment=dev", 0},
		{"an open run is its creation", "intend_deploy_run_oldest_open_timestamp_seconds", "environment=dev", 1700000000.5},
		{"no open run reads 0", "intend_deploy_run_oldest_open_timestamp_seconds", "environment=prod", 0},
		{"compiles are counted by result", "intend_compiles_total", "environment=prod,result=failed", 3},
		{"a result with no compile reads 0", "intend_compiles_total", "environment=dev,result=succeeded", 0},
		{"compile time is summed", "intend_compile_duration_seconds", "environment=prod,result=failed", 4.5},
		{"an agent without executor reads 0", "intend_agent_executors", "agent=web1,environment=prod", 0},
		{"live executors by agent", "intend_agent_executors", "agent=db,environment=prod", 2},
		{"instances by state", "intend_lsm_instances", "entity=vpn,environment=prod,state=up", 5},
		{"an empty state reads 0", "intend_lsm_instances", "entity=vpn,environment=prod,state=updating", 0},
		{"a transient state has its oldest change", "intend_lsm_transient_oldest_change_timestamp_seconds",
			"entity=vpn,environment=prod,state=creating", 1700000000.5},
		{"an empty transient state reads 0", "intend_lsm_transient_oldest_change_timestamp_seconds",
			"entity=vpn,environment=prod,state=updating", 0},
	}
	for _, c := range cases {
		if v, ok := series(t, tel, c.family)[c.key]; !ok || v != c.want {
			t.Errorf("%s: %s{%s} = %v (present %v), want %v", c.reason, c.family, c.key, v, ok, c.want)
		}
	}
	if got := series(t, tel, "intend_lsm_transient_oldest_change_timestamp_seconds"); len(got) != 2 {
		t.Errorf("transient series %v: want the two transient states only", got)
	}
	if got := series(t, tel, "intend_compiles_total"); len(got) != 4 {
		t.Errorf("compile series %v: want 2 environments × 2 results", got)
	}
}
