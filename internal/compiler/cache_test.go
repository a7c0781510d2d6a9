package compiler

import (
	"bytes"
	"context"
	"encoding/json"
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
