package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/runstages"
	"github.com/intendhq/intend/internal/telemetry"
)

// fakeHandler is an adapter whose observation and errors are set per test.
type fakeHandler struct {
	obs adapters.Observation
	err error
}

func (f *fakeHandler) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	return f.obs, f.err
}

func (f *fakeHandler) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	return f.err
}

func (f *fakeHandler) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	return f.err
}

func (f *fakeHandler) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	return f.err
}

// timed returns a handler context whose adapter calls are timed into tel.
func timed(tel *telemetry.Telemetry, opts ...adapters.ContextOption) *adapters.Context {
	return adapters.NewContext(append(opts, adapters.WithCallTimer(tel.ObserveAdapterCall))...)
}

func TestAdapterCallDuration(t *testing.T) {
	t.Parallel()
	id, err := resource.Parse("fs::File[h,path=/a]")
	if err != nil {
		t.Fatal(err)
	}
	want := adapters.Resource{ID: id, Attributes: map[string]any{"content": "new"}}
	purged := adapters.Resource{ID: id, Purged: true}
	exists := adapters.Observation{Exists: true, Attributes: map[string]any{"content": "old"}}
	same := adapters.Observation{Exists: true, Attributes: map[string]any{"content": "new"}}
	cases := []struct {
		name    string
		reason  string
		h       *fakeHandler
		desired adapters.Resource
		dryRun  bool
		want    map[string]float64
	}{
		{"create", "an absent resource is observed, then created",
			&fakeHandler{}, want, false,
			map[string]float64{"operation=observe,type=fs::File": 1, "operation=create,type=fs::File": 1}},
		{"update", "a different resource is observed, then updated",
			&fakeHandler{obs: exists}, want, false,
			map[string]float64{"operation=observe,type=fs::File": 1, "operation=update,type=fs::File": 1}},
		{"delete", "a purged resource that exists is deleted",
			&fakeHandler{obs: exists}, purged, false,
			map[string]float64{"operation=observe,type=fs::File": 1, "operation=delete,type=fs::File": 1}},
		{"up to date", "an up-to-date resource is only observed",
			&fakeHandler{obs: same}, want, false,
			map[string]float64{"operation=observe,type=fs::File": 1}},
		{"dry-run", "a dry-run only observes",
			&fakeHandler{obs: exists}, want, true,
			map[string]float64{"operation=observe,type=fs::File": 1}},
		{"failure", "a failed call is timed too",
			&fakeHandler{err: errors.New("denied")}, want, false,
			map[string]float64{"operation=observe,type=fs::File": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tel := newTelemetry(t)
			_, runErr := adapters.Run(context.Background(), c.h, timed(tel), c.desired, c.dryRun)
			if (runErr != nil) != (c.h.err != nil) || (runErr != nil && !errors.Is(runErr, c.h.err)) {
				t.Errorf("%s: run error %v, want the adapter's %v passed through", c.reason, runErr, c.h.err)
			}
			got := series(t, tel, "intend_adapter_call_duration_seconds")
			if len(got) != len(c.want) {
				t.Errorf("%s: calls %v, want %v", c.reason, got, c.want)
			}
			for k, n := range c.want {
				if got[k] != n {
					t.Errorf("%s: calls %v, want %v", c.reason, got, c.want)
					break
				}
			}
		})
	}
}

func TestAdapterCallDurationNil(t *testing.T) {
	t.Parallel()
	var tel *telemetry.Telemetry
	h := &fakeHandler{}
	desired := adapters.Resource{ID: resource.MustParse("fs::File[h,path=/a]"), Attributes: map[string]any{"content": "x"}}
	if _, err := adapters.Run(context.Background(), h, timed(tel), desired, false); err != nil {
		t.Errorf("a nil Telemetry as the call timer: %v", err)
	}
}

func TestDeployRunDuration(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	tel.DeployRunDuration.WithLabelValues("prod", "deploy", "done").Observe(42)
	if got := series(t, tel, "intend_deploy_run_duration_seconds"); got["action=deploy,environment=prod,status=done"] != 1 {
		t.Errorf("deploy run durations %v, want one per environment, action and status", got)
	}
}

// capableHandler has every optional capability; it counts the calls.
type capableHandler struct {
	fakeHandler
	calls map[string]int
}

func (c *capableHandler) Validate(context.Context, *adapters.Context, adapters.Resource) error {
	c.calls["validate"]++
	return errors.New("attribute content: bad")
}

func (c *capableHandler) Reload(context.Context, *adapters.Context, adapters.Resource) error {
	c.calls["reload"]++
	return nil
}

func (c *capableHandler) DiscoverFacts(_ context.Context, hc *adapters.Context, _ adapters.Resource) error {
	c.calls["facts"]++
	hc.SetFact("size", 1)
	return nil
}

// TestAdapterCallDurationOfCapabilities: the engine times the optional
// capabilities' calls too, and an adapter without them gets no such
// series.
func TestAdapterCallDurationOfCapabilities(t *testing.T) {
	t.Parallel()
	id := resource.MustParse("fs::File[h,path=/a]")
	desired := adapters.Resource{ID: id, Attributes: map[string]any{"content": "new"}}
	tel := newTelemetry(t)

	c := &capableHandler{fakeHandler: fakeHandler{obs: adapters.Observation{Exists: true,
		Attributes: map[string]any{"content": "new"}}}, calls: map[string]int{}}
	if _, err := adapters.Run(context.Background(), c, timed(tel), desired, false); err == nil {
		t.Fatal("the adapter's validation was not called")
	}
	good := &capableHandler{fakeHandler: c.fakeHandler, calls: map[string]int{}}
	hc := timed(tel, adapters.WithEvent(true))
	if _, err := adapters.Run(context.Background(), &noValidation{good}, hc, desired, false); err != nil {
		t.Fatal(err)
	}
	if good.calls["reload"] != 1 || good.calls["facts"] != 1 || hc.Facts()["size"] != 1 {
		t.Fatalf("calls %v, facts %v; want one reload and one fact discovery", good.calls, hc.Facts())
	}
	got := series(t, tel, "intend_adapter_call_duration_seconds")
	for op, n := range map[string]float64{"validate": 2, "reload": 1, "facts": 1} { // both runs validated
		if got["operation="+op+",type=fs::File"] != n {
			t.Errorf("operation %s timed %v times, want %v (%v)", op, got["operation="+op+",type=fs::File"], n, got)
		}
	}

	// An adapter without capabilities: only its own calls are timed.
	other := newTelemetry(t)
	if _, err := adapters.Run(context.Background(), &fakeHandler{obs: c.obs}, timed(other, adapters.WithEvent(true)),
		desired, false); err != nil {
		t.Fatalf("a plain adapter: %v", err)
	}
	if got := series(t, other, "intend_adapter_call_duration_seconds"); len(got) != 1 || got["operation=observe,type=fs::File"] != 1 {
		t.Errorf("a plain adapter's calls timed as %v, want one observe", got)
	}
}

// noValidation is capableHandler without a refusing Validate.
type noValidation struct{ *capableHandler }

func (n *noValidation) Validate(context.Context, *adapters.Context, adapters.Resource) error {
	n.calls["validate"]++
	return nil
}

// TestBatchStages: a finished run's stages add up, per environment and
// stage, with the run's own buckets.
func TestBatchStages(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	var r runstages.Run
	r.Execute.Observe(2)
	r.Execute.Observe(40)
	r.Record.Observe(0.01)
	tel.BatchStages.AddRun("prod", r)
	tel.BatchStages.AddRun("prod", r)
	got := series(t, tel, "intend_batch_stage_seconds")
	if len(got) != 2 || got["environment=prod,stage=execute"] != 4 || got["environment=prod,stage=record"] != 2 {
		t.Errorf("batch stages %v, want 4 executions and 2 recordings of prod, no empty stage", got)
	}
	tel.BatchesInFlight.WithLabelValues("prod", "web").Inc()
	if got := series(t, tel, "intend_executor_batches_in_flight"); got["agent=web,environment=prod"] != 1 {
		t.Errorf("batches in flight %v", got)
	}
}
