package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	}
	for _, c := range cases {
		if v, ok := c.got[c.key]; !ok || v != c.want {
			t.Errorf("%s: %s = %v (present %v), want %v", c.reason, c.key, v, ok, c.want)
		}
	}
	if len(resources) != 3 || len(queued) != 2 {
		t.Errorf("resources %v, queued %v: want exactly the source's series", resources, queued)
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
	tel.BatchSize.Observe(1)

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
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "intend_executor_batch_resources_count 1") {
		t.Errorf("/metrics answered %d without the other metrics:\n%s", resp.StatusCode, body)
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
