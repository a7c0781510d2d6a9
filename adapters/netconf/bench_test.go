package netconf_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/netconf"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/netconftest"
)

// benchEntries and benchConcurrency: 200 list entries on one device, run
// 16 at once, the executor's default concurrency per agent.
const (
	benchEntries     = 200
	benchConcurrency = 16
)

// BenchmarkInterfaces200 (issue 29) creates 200 interfaces on one
// netconfd in one batch through adapters.Run, 16 at a time sharing the
// version's cached session, as an executor runs an agent's batch, then
// makes a no-op pass over them. It reports the wall time, the commits
// made, and the CPU per resource of this process (getrusage: the
// adapter, its session and SSH) and of netconfd, next to the same batch
// of fs::File resources. Run by `make bench`.
func BenchmarkInterfaces200(b *testing.B) {
	srv := netconftest.Start(b)
	dir := b.TempDir()
	round := 0
	for b.Loop() {
		round++
		ifs := make([]adapters.Resource, benchEntries)
		files := make([]adapters.Resource, benchEntries)
		for i := range ifs {
			ifs[i] = iface(srv, fmt.Sprintf("bench%d-%d", round, i), map[string]any{"description": "bench " + strconv.Itoa(i), "enabled": true})
			p := filepath.Join(dir, fmt.Sprintf("f%d-%d", round, i))
			files[i] = adapters.Resource{ID: resource.ID{Type: fs.FileType, Agent: "local", Attribute: "path", Value: p},
				Attributes: map[string]any{"path": p, "content": "bench " + strconv.Itoa(i) + "\n", "mode": "0644"}}
		}
		cache := adapters.NewCache()
		scope := adapters.Scope{Environment: "bench", Version: int64(round)}
		nc := pass(b, netconf.Config{}, cache, scope, ifs, adapters.OpCreate, srv.Pid())
		ncNoop := pass(b, netconf.Config{}, cache, scope, ifs, adapters.OpNone, srv.Pid())
		cache.Close()
		fc := pass(b, fs.File{}, adapters.NewCache(), scope, files, adapters.OpCreate, 0)
		fcNoop := pass(b, fs.File{}, adapters.NewCache(), scope, files, adapters.OpNone, 0)

		b.Logf("load: %s", loadavg())
		b.Logf("netconf:: %d interfaces on one device, %d at once: create %s in %d commits, no-op %s (%d commits)",
			benchEntries, benchConcurrency, nc.wall.Round(time.Millisecond), nc.commits, ncNoop.wall.Round(time.Millisecond), ncNoop.commits)
		b.Logf("CPU per resource, create: netconf:: %s (netconfd %s), fs::File %s", nc.perRes(), nc.devicePerRes(), fc.perRes())
		b.Logf("CPU per resource, no-op:  netconf:: %s (netconfd %s), fs::File %s", ncNoop.perRes(), ncNoop.devicePerRes(), fcNoop.perRes())
		b.ReportMetric(nc.wall.Seconds(), "create-s")
		b.ReportMetric(ncNoop.wall.Seconds(), "noop-s")
		b.ReportMetric(float64(nc.commits), "commits")
		b.ReportMetric(float64(nc.cpu.Microseconds())/benchEntries, "cpu-µs/create")
		b.ReportMetric(float64(ncNoop.cpu.Microseconds())/benchEntries, "cpu-µs/noop")
		b.ReportMetric(float64(fc.cpu.Microseconds())/benchEntries, "fs-cpu-µs/create")
		b.ReportMetric(float64(fcNoop.cpu.Microseconds())/benchEntries, "fs-cpu-µs/noop")

		// Leave the device as it was, untimed.
		b.StopTimer()
		for i := range ifs {
			ifs[i].Purged = true
		}
		cache = adapters.NewCache()
		pass(b, netconf.Config{}, cache, scope, ifs, adapters.OpDelete, 0)
		cache.Close()
		b.StartTimer()
	}
}

// measured is one pass over a batch.
type measured struct {
	wall, cpu, device time.Duration
	commits           int64
}

func (m measured) perRes() time.Duration { return (m.cpu / benchEntries).Round(time.Microsecond) }
func (m measured) devicePerRes() time.Duration {
	return (m.device / benchEntries).Round(time.Microsecond)
}

// pass runs rs through adapters.Run, benchConcurrency at once, each with
// its own context on the shared cache and scope, and checks each made
// want.
func pass(b *testing.B, h adapters.Handler, cache *adapters.Cache, scope adapters.Scope, rs []adapters.Resource, want adapters.Operation, pid int) measured {
	b.Helper()
	sem := make(chan struct{}, benchConcurrency)
	errs := make([]error, len(rs))
	commits, cpu, dev, start := netconf.Commits(), processCPU(b), pidCPU(pid), time.Now()
	var wg sync.WaitGroup
	for i, r := range rs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			hc := adapters.NewContext(adapters.WithCache(cache), adapters.WithScope(scope))
			defer hc.Close()
			out, err := adapters.Run(ctx, h, hc, r, false)
			if err == nil && out.Action != want {
				err = fmt.Errorf("%s, want %s", out.Action, want)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	m := measured{wall: time.Since(start), cpu: processCPU(b) - cpu, device: pidCPU(pid) - dev, commits: netconf.Commits() - commits}
	for i, err := range errs {
		if err != nil {
			b.Fatalf("%s: %v", rs[i].ID, err)
		}
	}
	return m
}

// processCPU is this process's user and system CPU, by getrusage.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidCPU is the user and system CPU of process pid from /proc (zero
// when there is none), in clock ticks of 10 ms.
func pidCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is the
	// first, utime the 12th, stime the 13th.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}
