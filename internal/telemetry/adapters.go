package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intendhq/intend/adapters"
)

// InstrumentAdapter returns h with every call timed in
// intend_adapter_call_duration_seconds{type,operation}: type is
// resourceType ("fs::File"), operation one of observe, create, update,
// delete, validate, reload, facts. Failed calls are timed too; a call that
// panics is not (the engine turns the panic into a failure of that
// resource). A nil Telemetry returns h unchanged.
//
// The wrapper implements every optional interface of the adapter contract
// (adapters.Validator, FactDiscoverer, Reloader): a call the wrapped
// adapter does not implement does nothing and is not timed, which is what
// the engine does for an adapter without it. A new optional interface
// must be forwarded here too.
func (t *Telemetry) InstrumentAdapter(resourceType string, h adapters.Handler) adapters.Handler {
	if t == nil {
		return h
	}
	return &timedHandler{next: h, typ: resourceType, hist: t.AdapterCallDuration}
}

type timedHandler struct {
	next adapters.Handler
	typ  string
	hist *prometheus.HistogramVec
}

func (h *timedHandler) observe(op string, start time.Time) {
	h.hist.WithLabelValues(h.typ, op).Observe(time.Since(start).Seconds())
}

func (h *timedHandler) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	start := time.Now()
	obs, err := h.next.Observe(ctx, hc, desired)
	h.observe("observe", start)
	return obs, err
}

func (h *timedHandler) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	start := time.Now()
	err := h.next.Create(ctx, hc, desired)
	h.observe("create", start)
	return err
}

func (h *timedHandler) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	start := time.Now()
	err := h.next.Update(ctx, hc, desired, diff)
	h.observe("update", start)
	return err
}

func (h *timedHandler) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	start := time.Now()
	err := h.next.Delete(ctx, hc, desired)
	h.observe("delete", start)
	return err
}

func (h *timedHandler) Validate(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	v, ok := h.next.(adapters.Validator)
	if !ok {
		return nil
	}
	start := time.Now()
	err := v.Validate(ctx, hc, desired)
	h.observe("validate", start)
	return err
}

func (h *timedHandler) Reload(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	r, ok := h.next.(adapters.Reloader)
	if !ok {
		return nil
	}
	start := time.Now()
	err := r.Reload(ctx, hc, desired)
	h.observe("reload", start)
	return err
}

func (h *timedHandler) DiscoverFacts(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	f, ok := h.next.(adapters.FactDiscoverer)
	if !ok {
		return nil
	}
	start := time.Now()
	err := f.DiscoverFacts(ctx, hc, desired)
	h.observe("facts", start)
	return err
}
