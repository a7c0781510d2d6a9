package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/executor"
	"github.com/intendhq/intend/internal/plan"
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

// delayInFlight is the operations in flight the configuration allows for n
// resources spread round robin over agents, in batches of at most
// batchMax resources running concurrency resources at once, at most
// perAgent batches of one agent and total batches in all at once:
//
//	in flight = Σ over the batches running at once of min(its resources, concurrency),
//	batches running at once = min(total, Σ_agents min(⌈n_agent ÷ batchMax⌉, perAgent))
//
// (one resource's calls run one after the other, so a resource is one
// operation in flight). perAgent is the run's bound per agent, and with
// an executor per agent also those executors' slots; total is the run's
// bound, and with pooled executors also their slots.
func delayInFlight(n, agents, perAgent, total, concurrency, batchMax int) int {
	agents = max(agents, 1)
	sum, running := 0, 0
	for a := range agents {
		na := n / agents
		if a < n%agents {
			na++
		}
		for b := 0; b < min((na+batchMax-1)/batchMax, perAgent) && running < total; b++ {
			size := min(batchMax, na-b*batchMax)
			sum += min(size, concurrency)
			running++
		}
	}
	return sum
}

// delaySharedInFlight is delayInFlight for agents that share batches (one
// pool serves them all, DeployGeneration 3): the run's n resources, by
// agent name, are cut into ⌈n ÷ batchMax⌉ batches of even size, and each
// agent of a batch runs min(its resources there, concurrency) at once;
// the batches go in order while each of their agents has fewer than
// perAgent in flight and fewer than total run in all.
func delaySharedInFlight(n, agents, perAgent, total, concurrency, batchMax int) int {
	agents = max(agents, 1)
	names := make([]string, agents)
	size := make(map[string]int, agents)
	for a := range agents {
		names[a] = fmt.Sprintf("bench-%d", a)
		size[names[a]] = n / agents
		if a < n%agents {
			size[names[a]]++
		}
	}
	slices.Sort(names)
	cut := (n + batchMax - 1) / batchMax
	if cut == 0 {
		return 0
	}
	per := (n + cut - 1) / cut
	// batches[k][agent]: the resources of agent in batch k.
	var batches []map[string]int
	room := 0
	for _, a := range names {
		for left := size[a]; left > 0; {
			if room == 0 {
				batches = append(batches, map[string]int{})
				room = per
			}
			take := min(left, room)
			batches[len(batches)-1][a] += take
			left -= take
			room -= take
		}
	}
	sum, running := 0, 0
	inFlight := map[string]int{}
	for _, b := range batches {
		if running >= total {
			break
		}
		ok := true
		for a := range b {
			ok = ok && inFlight[a] < perAgent
		}
		if !ok {
			continue
		}
		running++
		for a, c := range b {
			inFlight[a]++
			sum += min(c, concurrency)
		}
	}
	return sum
}

// delayBounds are delayInFlight's perAgent and total for k executors
// serving the agents: one pool of k executors serving every agent
// (pooled), or k executors per agent.
func delayBounds(k, agents, batches, maxBatches int, pooled bool) (perAgent, total int) {
	if pooled {
		return agentMaxInFlight, min(maxInFlight, k*min(maxBatches, batches*max(agents, 1)))
	}
	return min(agentMaxInFlight, k*batches), maxInFlight
}

// benchDelay deploys n bench::Delay resources, spread round robin over the
// agents, on the external executors that host a, and reports the run's
// time against the ideal: the operations × a.delay ÷ the operations in
// flight (delayInFlight). It prints where the run's time went (breakdown,
// from the database at pgURL) to out.
func benchDelay(ctx context.Context, c *client.Client, pgURL string, out io.Writer, a *delayAdapter, n, executors, maxInFlight int) ([]row, error) {
	type res struct {
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	}
	rs := make([]res, n)
	for i := range rs {
		name := fmt.Sprintf("d%06d", i)
		rs[i] = res{ID: delayType + "[" + benchAgent(i) + ",name=" + name + "]", Attributes: map[string]any{"name": name}}
	}
	body, _ := json.Marshal(map[string]any{"resources": rs})
	v, err := c.ExportVersion(ctx, "bench", body)
	if err != nil {
		return nil, err
	}
	before := a.calls.Load()
	t0 := time.Now()
	run, err := releaseAndWait(ctx, c, v.Version)
	if err != nil {
		return nil, err
	}
	measured := time.Since(t0)
	if run.Deployed != n {
		return nil, fmt.Errorf("delay deploy: %+v, want %d deployed", run, n)
	}
	ops := a.calls.Load() - before
	if err := breakdown(ctx, pgURL, run.WorkflowID, out); err != nil {
		return nil, err
	}
	cfg := executor.DefaultConfig()
	perAgent, total := delayBounds(executors, agents, cfg.Batches, cfg.MaxBatches, pooled)
	inFlight := delayInFlight(n, agents, perAgent, total, cfg.Concurrency, plan.DefaultLimits.MaxResources)
	if pooled {
		// One pool serves every agent: its agents share batches.
		inFlight = delaySharedInFlight(n, agents, perAgent, total, cfg.Concurrency, plan.DefaultLimits.MaxResources)
	}
	ideal := time.Duration(ops) * a.delay / time.Duration(inFlight)
	where := fmt.Sprintf("%d resources, %d agent(s) × %d executor(s)", n, max(agents, 1), executors)
	if pooled {
		where = fmt.Sprintf("%d resources, %d agent(s) on one pool of %d executor(s)", n, max(agents, 1), executors)
	}
	return []row{
		{"delay: operations (adapter calls)", fmt.Sprint(ops), fmt.Sprintf("%s, %v each", where, a.delay)},
		{"delay: operations in flight allowed", fmt.Sprint(inFlight), inFlightNote(pooled, cfg.Concurrency, total, perAgent)},
		{"delay: ideal time", ideal.Round(time.Millisecond).String(), "operations × delay ÷ in flight"},
		{"delay: measured, release → all recorded", measured.Round(time.Millisecond).String(), fmt.Sprintf("ratio %.2f to the ideal", measured.Seconds()/ideal.Seconds())},
	}, nil
}

// loadavg is the machine's load averages (1, 5, 15 minutes), or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// inFlightNote says how delayInFlight or delaySharedInFlight counted.
func inFlightNote(pooled bool, concurrency, total, perAgent int) string {
	if pooled {
		return fmt.Sprintf("Σ over the batches at once (≤ %d) of Σ their agents' min(resources there, concurrency %d): the agents share batches",
			total, concurrency)
	}
	return fmt.Sprintf("concurrency %d × min(%d at once, Σ agents min(batches of ≤ %d, %d))",
		concurrency, total, plan.DefaultLimits.MaxResources, perAgent)
}
