package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
)

func TestDelayAdapterWaits(t *testing.T) {
	a := &delayAdapter{delay: 30 * time.Millisecond}
	ctx := context.Background()
	start := time.Now()
	obs, err := a.Observe(ctx, nil, adapters.Resource{})
	if err != nil || obs.Exists {
		t.Fatalf("Observe = %+v, %v; want absent, nil", obs, err)
	}
	if err := a.Create(ctx, nil, adapters.Resource{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, nil, adapters.Resource{}, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("three calls took %v, want at least 3 × 30ms", d)
	}
	if n := a.calls.Load(); n != 3 {
		t.Errorf("calls = %d, want 3", n)
	}
}

func TestDelayAdapterHonoursCancellation(t *testing.T) {
	a := &delayAdapter{delay: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := a.Create(ctx, nil, adapters.Resource{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create = %v, want the context's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Create returned after %v, want soon after the cancellation", d)
	}
	if _, err := a.Observe(ctx, nil, adapters.Resource{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Observe on a done context = %v, want its error", err)
	}
	if n := a.calls.Load(); n != 0 {
		t.Errorf("calls = %d, want 0 (none waited its delay)", n)
	}
}

func TestDelayInFlight(t *testing.T) {
	for _, c := range []struct{ n, agents, perAgent, total, want int }{
		{10000, 1, 4, 8, 4 * 16},       // one agent: its executor's 4 batches of 16
		{10000, 4, 4, 8, 8 * 16},       // the run's 8 batches at once
		{10000, 256, 4, 8, 8 * 16},     // idem
		{40, 4, 4, 8, 4 * 10},          // batches of 10 resources
		{10000, 16, 4, 256, 32 * 16},   // 16 agents, 2 batches each (500 + 125)
		{10000, 256, 4, 256, 256 * 16}, // 256 agents of one batch of 39–40
		{100000, 4, 4, 256, 16 * 16},   // 4 agents of 50 batches: 4 each at once
		{10000, 256, 4, 64, 64 * 16},   // one pooled executor: its 64 slots
	} {
		if got := delayInFlight(c.n, c.agents, c.perAgent, c.total, 16, 500); got != c.want {
			t.Errorf("delayInFlight(%d resources, %d agents, %d per agent, %d in all) = %d, want %d",
				c.n, c.agents, c.perAgent, c.total, got, c.want)
		}
	}
}

func TestDelaySharedInFlight(t *testing.T) {
	for _, c := range []struct{ n, agents, perAgent, total, want int }{
		{10000, 1, 4, 64, 4 * 16},       // one agent: 4 of its 20 batches at once
		{10000, 256, 4, 64, 4286},       // 20 batches of 500, 16 of each agent, and more of the 19 agents two batches split
		{10000, 16, 4, 64, 16 * 2 * 16}, // 625 each: 16 agents in 20 batches of 500, each in 2 of them
		{40, 4, 4, 64, 4 * 10},          // one batch of 4 agents of 10
		{10000, 256, 4, 1, 13 * 16},     // one batch at once: its 12–13 agents (13 here)
	} {
		if got := delaySharedInFlight(c.n, c.agents, c.perAgent, c.total, 16, 500); got != c.want {
			t.Errorf("delaySharedInFlight(%d resources, %d agents, %d per agent, %d in all) = %d, want %d",
				c.n, c.agents, c.perAgent, c.total, got, c.want)
		}
	}
}

func TestDelayBounds(t *testing.T) {
	maxInFlight, agentMaxInFlight = 256, 4
	if p, tot := delayBounds(1, 256, 4, 64, true); p != 4 || tot != 64 {
		t.Errorf("one pooled executor of 256 agents: %d per agent, %d in all; want 4, 64", p, tot)
	}
	if p, tot := delayBounds(2, 4, 4, 64, true); p != 4 || tot != 32 {
		t.Errorf("two pooled executors of 4 agents: %d per agent, %d in all; want 4, 2 × 16", p, tot)
	}
	if p, tot := delayBounds(1, 16, 4, 64, false); p != 4 || tot != 256 {
		t.Errorf("an executor per agent: %d per agent, %d in all; want 4, 256", p, tot)
	}
}
