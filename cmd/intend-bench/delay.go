package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/intendhq/intend/adapters"
)

// delayType is the resource type of the delay adapter. It is registered
// only in the benchmark's external executors, never among the product's
// adapters (adapters/builtin).
const delayType = "bench::Delay"

// delayAdapter waits a fixed delay per call and does nothing else: no CPU,
// no target. A deploy of its resources measures what intend serializes
// around the adapters (issue 28): with the adapters only waiting, the time
// of a run is the operations × the delay ÷ the operations in flight, on any
// machine, unless something else holds them back.
type delayAdapter struct {
	delay time.Duration
	calls atomic.Int64 // the calls that waited their whole delay
}

// wait sleeps d, or until ctx is done.
func (a *delayAdapter) wait(ctx context.Context) error {
	t := time.NewTimer(a.delay)
	defer t.Stop()
	select {
	case <-t.C:
		a.calls.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Observe waits, then reports the resource absent: every attempt creates.
func (a *delayAdapter) Observe(ctx context.Context, _ *adapters.Context, _ adapters.Resource) (adapters.Observation, error) {
	return adapters.Observation{}, a.wait(ctx)
}

// Create waits.
func (a *delayAdapter) Create(ctx context.Context, _ *adapters.Context, _ adapters.Resource) error {
	return a.wait(ctx)
}

// Update waits.
func (a *delayAdapter) Update(ctx context.Context, _ *adapters.Context, _ adapters.Resource, _ adapters.Diff) error {
	return a.wait(ctx)
}

// Delete waits.
func (a *delayAdapter) Delete(ctx context.Context, _ *adapters.Context, _ adapters.Resource) error {
	return a.wait(ctx)
}
