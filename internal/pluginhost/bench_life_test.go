package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/ledger"
)

// BenchmarkPluginStart is a Go plugin's first-call latency: a host with
// the artifact in its cache (no fetch: its digest is verified, as before
// every start), Handler and one Observe, then Close (not timed). With
// -benchtime 10x it is the median (and the slowest) of 10 starts.
//
//	go test -run '^$' -bench PluginStart -benchtime 10x ./internal/pluginhost/
func BenchmarkPluginStart(b *testing.B) {
	s := &store{}
	ref := lifeRef(s.put(lifeBinary(b)))
	opts := Options{CacheDir: b.TempDir(), Fetch: s.fetch, Log: slog.New(slog.DiscardHandler)}
	warm := New(opts) // fills the cache
	if _, err := warm.Handler(context.Background(), "env1", ref, "test::Life"); err != nil {
		b.Fatal(err)
	}
	warm.Close()
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		h := New(opts)
		begin := time.Now()
		hd, err := h.Handler(context.Background(), "env1", ref, "test::Life")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := hd.Observe(context.Background(), adapters.NewContext(), res(b, "x", nil)); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(begin))
		b.StopTimer()
		h.Close()
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median/start")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "ms-max/start")
}

// BenchmarkTenPlugins is the memory of an executor with 10 Go plugins
// loaded (10 digests, one call each): the host process's resident memory
// and what the 10 cost it, and the plugins' own resident memory.
//
//	go test -run '^$' -bench TenPlugins -benchtime 1x ./internal/pluginhost/
func BenchmarkTenPlugins(b *testing.B) {
	for range b.N {
		// The 10 artifacts are put in the cache directly: the test's own
		// copies of them are not the host's memory.
		dir := b.TempDir()
		var refs []ledger.Plugin
		func() {
			bin := lifeBinary(b)
			if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
				b.Fatal(err)
			}
			for i := range 10 {
				v := variant(bin, i)
				sum := sha256.Sum256(v)
				hexDigest := hex.EncodeToString(sum[:])
				if err := os.WriteFile(filepath.Join(dir, "sha256", hexDigest), v, 0o500); err != nil {
					b.Fatal(err)
				}
				refs = append(refs, lifeRef("sha256:"+hexDigest))
			}
		}()
		runtime.GC()
		debug.FreeOSMemory()
		h := New(Options{CacheDir: dir, Log: slog.New(slog.DiscardHandler)})
		before, err := readRSS(os.Getpid())
		if err != nil {
			b.Fatal(err)
		}
		var plugins int64
		for _, ref := range refs {
			hd, err := h.Handler(context.Background(), "env1", ref, "test::Life")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := hd.Observe(context.Background(), adapters.NewContext(), res(b, "x", nil)); err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range h.live() {
			rss, err := readRSS(p.pid)
			if err != nil {
				b.Fatal(err)
			}
			plugins += rss
		}
		after, err := readRSS(os.Getpid())
		if err != nil {
			b.Fatal(err)
		}
		h.Close()
		b.ReportMetric(float64(after)/(1<<20), "host-MiB")
		b.ReportMetric(float64(after-before)/(1<<20), "host-added-MiB")
		b.ReportMetric(float64(plugins)/(1<<20), "plugins-MiB")
	}
}
