package compiler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestCacheReusesUnchangedInstances: a second compile of the same model
// takes unchanged instances from the cache and gives the same version; a
// changed instance, another model, or other facts of a model that reads
// facts are evaluated again; an
// instance with errors is never cached.
func TestCacheReusesUnchangedInstances(t *testing.T) {
	model := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	dir := writeProject(t, map[string]string{"main.cue": model})
	insts := map[string]json.RawMessage{
		"a": json.RawMessage(`{"name": "a", "title": "A"}`),
		"b": json.RawMessage(`{"name": "b", "title": "B"}`),
	}
	cache := NewCache(1000)
	opts := Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts}, Cache: cache, SourceKey: "m1"}
	first, err := Compile(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Compile(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cache.Hits() != 2 || !bytes.Equal(first.Export(), second.Export()) || second.Instances != 2 {
		t.Fatalf("hits %d; exports equal %v", cache.Hits(), bytes.Equal(first.Export(), second.Export()))
	}

	insts["b"] = json.RawMessage(`{"name": "b", "title": "Changed"}`)
	third, err := Compile(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cache.Hits() != 3 {
		t.Errorf("hits %d after one change, want 3", cache.Hits())
	}
	if !strings.Contains(string(third.Export()), "Changed") {
		t.Errorf("the changed instance came from the cache")
	}

	facts := map[string]map[string]json.RawMessage{"x::Y[a,k=v]": {"f": json.RawMessage(`1`)}}
	for _, o := range []Options{
		{Dir: dir, Instances: opts.Instances, Cache: cache, SourceKey: "m2"},
		{Dir: dir, Instances: opts.Instances, Cache: cache}, // no source key: no cache
	} {
		before := cache.Hits()
		if _, err := Compile(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if cache.Hits() != before {
			t.Errorf("options %+v hit the cache", o.SourceKey)
		}
	}

	// This model does not declare facts, so it cannot read them: other
	// facts (another instance's deploy reported some) keep its entries.
	before := cache.Hits()
	if _, err := Compile(context.Background(), Options{Dir: dir, Instances: opts.Instances, Cache: cache, SourceKey: "m1", Facts: facts}); err != nil {
		t.Fatal(err)
	}
	if cache.Hits() != before+2 {
		t.Errorf("new facts voided the entries of a model that does not read facts: hits %d, want %d", cache.Hits(), before+2)
	}
	// The same model declaring facts is keyed by them.
	withFacts := writeProject(t, map[string]string{"main.cue": model + "\nfacts: [string]: [string]: _\n"})
	for i, f := range []map[string]map[string]json.RawMessage{nil, nil, facts, facts} {
		before := cache.Hits()
		if _, err := Compile(context.Background(), Options{Dir: withFacts, Instances: opts.Instances, Cache: cache, SourceKey: "m3", Facts: f}); err != nil {
			t.Fatal(err)
		}
		if hit := cache.Hits() != before; hit != (i%2 == 1) {
			t.Errorf("compile %d of a model declaring facts: hit %v, want %v", i, hit, i%2 == 1)
		}
	}

	insts["c"] = json.RawMessage(`{"name": "c0", "title": "bad name"}`)
	for range 2 {
		if _, err := Compile(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "instances.c") {
			t.Fatalf("the erroneous instance compiled: %v", err)
		}
	}
}

// TestCacheHoldsNoParsedModel: what the cache keeps of a compile is its
// instances' resources, not the model the compile parsed. A cached
// resource kept its CUE position, which holds on to the parsed files:
// 120 KiB a compile, until a compile worker of the lifecycle engine
// passed its memory limit (1 GiB) some 10,000 compiles in and every
// validation on it was refused. Not parallel: it reads the heap.
func TestCacheHoldsNoParsedModel(t *testing.T) {
	model := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	dir := writeProject(t, map[string]string{"main.cue": model})
	cache := NewCache(1 << 20)
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	compile := func(i int) {
		// A new instance each time, as creates are: evaluated, then cached.
		insts := map[string]json.RawMessage{fmt.Sprintf("i%d", i): json.RawMessage(fmt.Sprintf(`{"name": %q, "title": "T"}`, letters(i)))}
		if _, err := Compile(context.Background(), Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts},
			Cache: cache, SourceKey: "m1"}); err != nil {
			t.Fatal(err)
		}
	}
	compile(0) // the first compile's one-time allocations
	const n = 200
	before := heap()
	for i := 1; i <= n; i++ {
		compile(i)
	}
	// Three small resources and a parameter a compile: 2-3 KiB.
	per := (heap() - before) / n
	t.Logf("%d B a compile, cache %d resources %d hits", per, cache.resources, cache.Hits())
	if per > 16<<10 {
		t.Errorf("the heap grows by %d KiB a compile with the cache; want at most 16 (its resources)", per>>10)
	}
}

// TestCachedResourceKeepsItsPosition: a duplicate id between an instance
// from the cache and a newly evaluated one still says where the cached
// one was produced.
func TestCachedResourceKeepsItsPosition(t *testing.T) {
	t.Parallel()
	model := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	dir := writeProject(t, map[string]string{"main.cue": model})
	cache := NewCache(1000)
	insts := map[string]json.RawMessage{"a": json.RawMessage(`{"name": "x", "title": "A"}`)}
	opts := Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts}, Cache: cache, SourceKey: "m1"}
	if _, err := Compile(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	insts["b"] = json.RawMessage(`{"name": "x", "title": "B"}`) // the same name: the same ids
	_, err := Compile(context.Background(), opts)
	var errs Errors
	if !errors.As(err, &errs) || cache.Hits() != 1 {
		t.Fatalf("Compile() = %v with %d cache hits; want duplicate id errors, instance a from the cache", err, cache.Hits())
	}
	found := false
	for _, e := range errs {
		if strings.Contains(e.Message, "duplicate id") && strings.Contains(e.Message, "(main.cue:") && len(e.Positions) == 1 &&
			e.Positions[0].File == "main.cue" {
			found = true
		}
	}
	if !found {
		t.Errorf("errors %v; want a duplicate id naming the cached producer's position in main.cue, at b's own position", errs)
	}
}
