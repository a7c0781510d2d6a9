package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// P8 of the brief: a compile of 1,000 service instances within 2 s, of one
// within 50 ms, loading the module and the standard library included. The
// instances come as the service inventory hands them to the compiler
// (Options.Instances, JSON parameters), each refined on its own into three
// resources, besides the model's two plain resources.

func benchmarkCompile(b *testing.B, n int, models *Models) {
	model := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	dir := writeProject(b, map[string]string{"main.cue": model})
	insts := map[string]json.RawMessage{}
	for i := range n {
		insts[fmt.Sprintf("s%d", i)] = json.RawMessage(fmt.Sprintf(`{"name": %q, "title": "Site %d"}`, letters(i), i))
	}
	opts := Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts}, Models: models, SourceKey: "m1"}
	b.ResetTimer()
	for b.Loop() {
		res, err := Compile(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		if res.Instances != n || len(res.Resources) != 2+3*n {
			b.Fatalf("%d instances, %d resources", res.Instances, len(res.Resources))
		}
	}
}

func BenchmarkCompileP8One(b *testing.B)      { benchmarkCompile(b, 1, nil) }
func BenchmarkCompileP8Thousand(b *testing.B) { benchmarkCompile(b, 1000, nil) }

// BenchmarkCompileP8OneBuilt: the same with the model built once
// (Options.Models), as a compile worker of the lifecycle engine compiles.
func BenchmarkCompileP8OneBuilt(b *testing.B) { benchmarkCompile(b, 1, NewModels(1)) }

// letters names i with lower-case letters only, as the model's names must be.
func letters(i int) string {
	s := ""
	for {
		s = string(rune('a'+i%26)) + s
		if i /= 26; i == 0 {
			return s
		}
	}
}

// BenchmarkCompileP8CachedThousand: the lifecycle engine's validation of
// one instance among 1,000 whose outputs are cached from an earlier
// compile of the same model.
func BenchmarkCompileP8CachedThousand(b *testing.B) { benchmarkCached(b, 1000, false, nil) }

// BenchmarkCompileP7CachedTenThousandFocused: the same with 10,000 live
// instances, focused as a validation's compile is (P7's bar: one update
// among 10,000 live instances up in 1 s).
func BenchmarkCompileP7CachedTenThousandFocused(b *testing.B) { benchmarkCached(b, 10000, true, nil) }

// BenchmarkCompileP8CachedThousandBuilt and
// BenchmarkCompileP7CachedTenThousandFocusedBuilt: the same with the
// model built once (Options.Models), as a compile worker compiles.
func BenchmarkCompileP8CachedThousandBuilt(b *testing.B) {
	benchmarkCached(b, 1000, false, NewModels(1))
}
func BenchmarkCompileP7CachedTenThousandFocusedBuilt(b *testing.B) {
	benchmarkCached(b, 10000, true, NewModels(1))
}

func benchmarkCached(b *testing.B, n int, focus bool, models *Models) {
	model := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	dir := writeProject(b, map[string]string{"main.cue": model})
	insts := map[string]json.RawMessage{}
	for i := range n {
		insts[fmt.Sprintf("s%d", i)] = json.RawMessage(fmt.Sprintf(`{"name": %q, "title": "Site %d"}`, letters(i), i))
	}
	cache := NewCache(1 << 20)
	opts := Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts}, Cache: cache, SourceKey: "m1", Models: models}
	if _, err := Compile(context.Background(), opts); err != nil {
		b.Fatal(err)
	}
	want := 2 + 3*n
	if focus {
		opts.Focus = &Focus{Entity: "site", Instance: "s0"}
		want = 3
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// One instance changed since the last compile.
		insts["s0"] = json.RawMessage(fmt.Sprintf(`{"name": "a", "title": "Changed %d"}`, i))
		res, err := Compile(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Resources) != want {
			b.Fatalf("%d resources, want %d", len(res.Resources), want)
		}
	}
}

// BenchmarkCompileServiceOne: a validation's compile with one service
// instance of vmModel's entity (the compile extracts the entity for the
// catalog, its lifecycle and JSON Schema, every time); Built: with the
// model built once, and the entity extracted once, as a compile worker
// compiles.
func BenchmarkCompileServiceOne(b *testing.B)      { benchmarkService(b, nil) }
func BenchmarkCompileServiceOneBuilt(b *testing.B) { benchmarkService(b, NewModels(1)) }

func benchmarkService(b *testing.B, models *Models) {
	dir := writeProject(b, map[string]string{"main.cue": vmModel})
	cache := NewCache(1 << 10)
	opts := Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"vm": {"a": json.RawMessage(`{"name": "a", "size": "s"}`)}},
		Cache: cache, SourceKey: "m1", Models: models}
	for b.Loop() {
		res, err := Compile(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Resources) != 2 || len(res.Services) != 1 {
			b.Fatalf("%d resources, %d services", len(res.Resources), len(res.Services))
		}
	}
}
