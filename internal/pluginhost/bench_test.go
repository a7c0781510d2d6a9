package pluginhost

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
)

// memory is a cheap in-memory adapter: a resource's value is always out
// of date, so every attempt is an observe and an update.
type memory struct{}

func (memory) Observe(_ context.Context, _ *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
	return adapters.Observation{Exists: true, Attributes: map[string]any{"name": r.Attributes["name"], "value": "old"}}, nil
}
func (memory) Create(context.Context, *adapters.Context, adapters.Resource) error { return nil }
func (memory) Update(context.Context, *adapters.Context, adapters.Resource, adapters.Diff) error {
	return nil
}
func (memory) Delete(context.Context, *adapters.Context, adapters.Resource) error { return nil }

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPluginOverhead: the same adapter (memory) through adapters.Run
// in process and through a plugin on a Unix socket (plugin.NewServer ↔
// NewClient, both ends in this process), in batches of 100 resources run
// at once, each an observe and an update. Each iteration runs one batch
// each way, alternately, so that the machine's load weighs on both alike.
// It reports wall and CPU time per resource for both and the plugin's
// overhead (issue 30's bar: +50 µs per resource), and the messages the
// host sent per batch.
func BenchmarkPluginOverhead(b *testing.B) {
	const batch = 100
	w := &wire{}
	c := start(b, map[string]adapters.Handler{thing: memory{}}, w)
	viaPlugin := handler(b, c, thing)
	resources := make([]adapters.Resource, batch)
	for i := range resources {
		resources[i] = thingResource(fmt.Sprintf("r%d", i), map[string]any{"value": "new"})
	}
	run := func(h adapters.Handler) (wall, cpu time.Duration) {
		start, startCPU := time.Now(), cpuTime()
		var wg sync.WaitGroup
		for _, r := range resources {
			wg.Go(func() {
				hc := adapters.NewContext()
				defer hc.Close()
				out, err := adapters.Run(context.Background(), h, hc, r, false)
				if err != nil || out.Action != adapters.OpUpdate {
					b.Errorf("Run = %+v, %v; want an update", out, err)
				}
			})
		}
		wg.Wait()
		return time.Since(start), cpuTime() - startCPU
	}
	run(viaPlugin) // the connection warm
	w.hostMessages.Store(0)
	w.pluginMessages.Store(0)
	var inWall, inCPU, plWall, plCPU time.Duration
	b.ResetTimer()
	for b.Loop() {
		wall, cpu := run(memory{})
		inWall, inCPU = inWall+wall, inCPU+cpu
		wall, cpu = run(viaPlugin)
		plWall, plCPU = plWall+wall, plCPU+cpu
	}
	n := float64(b.N * batch)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n }
	b.ReportMetric(per(inWall), "inproc-ns/resource")
	b.ReportMetric(per(plWall), "plugin-ns/resource")
	b.ReportMetric(per(plWall-inWall), "overhead-ns/resource")
	b.ReportMetric(per(inCPU), "inproc-cpu-ns/resource")
	b.ReportMetric(per(plCPU), "plugin-cpu-ns/resource")
	b.ReportMetric(per(plCPU-inCPU), "overhead-cpu-ns/resource")
	b.ReportMetric(float64(w.hostMessages.Load())/float64(b.N), "host-msgs/batch")
	b.ReportMetric(float64(w.pluginMessages.Load())/float64(b.N), "plugin-msgs/batch")
	b.ReportMetric(0, "ns/op")
}
