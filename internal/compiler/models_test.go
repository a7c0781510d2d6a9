package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// canonical is a compile's outcome as text: the result without its time,
// with its resources' origins, or the errors.
func canonical(res *Result, err error) string {
	if err != nil {
		var errs Errors
		if !errors.As(err, &errs) {
			return "error: " + err.Error()
		}
		b, _ := json.Marshal(errs)
		return "errors: " + string(b)
	}
	r := *res
	r.Took = 0
	origins := make([]string, len(r.Resources))
	for i, x := range r.Resources {
		origins[i] = x.Origin
	}
	b, err := json.Marshal(struct {
		R       Result
		Origins []string
	}{r, origins})
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	return string(b)
}

// TestModelsCompileAsFresh: a compile with the model built by an earlier
// compile (Options.Models) gives exactly what a compile that loads and
// builds the model gives: resources, origins, services, parameters,
// undefined resources (facts) and errors, in any order of compiles of
// several models, more than the cache holds; and a model is built once
// while it stays in the cache.
func TestModelsCompileAsFresh(t *testing.T) {
	t.Parallel()
	site := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	factsModel := `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/resource"
)

facts: resource.#Facts

resources: {
	seed: fs.#File & {path: "/seed", content: "x"}
	copy: fs.#File & {path: "/copy", content: "hash was \(facts[seed.id].content_hash)"}
}
`
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	type project struct {
		files map[string]string
		opts  []Options // Dir, Models, SourceKey and Cache set below
	}
	projects := []project{
		{map[string]string{"main.cue": site}, []Options{
			{Instances: map[string]map[string]json.RawMessage{"site": {"a": raw(`{"name": "a", "title": "A"}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"site": {"a": raw(`{"name": "a", "title": "A2"}`), "b": raw(`{"name": "b", "title": "B"}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"site": {"a": raw(`{"name": "a0", "title": "bad name"}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"site": {"a": raw(`{"name": "x", "title": "A"}`), "b": raw(`{"name": "x", "title": "B"}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"nosuch": {}}},
		}},
		{map[string]string{"main.cue": vmModel}, []Options{
			{Instances: map[string]map[string]json.RawMessage{"vm": {"0b6c": raw(`{"name": "web", "size": "s"}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"vm": {"0b6c": raw(`{"name": "web", "size": "xl"}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"vm": {"0b6c": raw(`{"name": "web", "size": "s"}`), "9f2e": raw(`{"name": "db", "size": "l", "memory": 16}`)}},
				Focus: &Focus{Entity: "vm", Instance: "9f2e"}},
		}},
		{map[string]string{"main.cue": relationsModel}, []Options{
			{Instances: map[string]map[string]json.RawMessage{"alias": {"a1": raw(`{"name": "www", "site": "blog", "peers": ["blog"]}`)}},
				Related: map[string]map[string]json.RawMessage{"alias": {"a1": raw(`{"site": {"name": "blog", "port": 1}, "peers": [{"name": "blog"}]}`)}}},
			{Instances: map[string]map[string]json.RawMessage{"alias": {"a1": raw(`{"name": "www", "site": "blog", "peers": ["blog"]}`)}}},
		}},
		{versionsModel("services: vm: #V2 & {previous: [#V1]}"), []Options{
			{Instances: map[string]map[string]json.RawMessage{"vm": {"a": raw(`{"name": "a", "memory": 3}`), "b": raw(`{"name": "b", "ram": 4}`)}},
				InstanceVersions: map[string]map[string]int{"vm": {"a": 1}}},
			{Instances: map[string]map[string]json.RawMessage{"vm": {"a": raw(`{"name": "a", "memory": 3}`)}},
				InstanceVersions: map[string]map[string]int{"vm": {"a": 7}}},
		}},
		{map[string]string{"main.cue": factsModel}, []Options{
			{},
			{Facts: map[string]map[string]json.RawMessage{"fs::File[localhost,path=/seed]": {"content_hash": raw(`"sha256:ab"`)}}},
			{Facts: map[string]map[string]json.RawMessage{"fs::File[localhost,path=/seed]": {"size": raw(`3`)}}},
		}},
		{map[string]string{"main.cue": "package main\n\nresources: x: 1 & 2\n"}, []Options{{}}},
		// Entities with errors: a previous version as new as the entity, a
		// reference to no entity, an entity without output.
		{versionsModel("services: vm: #V3 & {previous: [#V2 & {version: 3}, #V1]}\nservices: other: #V1"), []Options{
			{Instances: map[string]map[string]json.RawMessage{"vm": {"a": raw(`{"name": "a", "ram": 3}`)}, "other": {"b": raw(`{"name": "b", "memory": 3}`)}}},
			{},
		}},
		{map[string]string{"main.cue": strings.Replace(relationsModel, `site: string @lsm(rw, ref=site)`, `site: string @lsm(rw, ref=nosuch)`, 1) +
			"\nservices: bare: lsm.#Entity & {lifecycle: lsm.simple, parameter: {}}\n"}, []Options{
			{Instances: map[string]map[string]json.RawMessage{"site": {"s1": raw(`{"name": "s", "port": 1}`)}}},
		}},
	}
	models := NewModels(4) // fewer than the projects: some are built again
	cached, fresh := NewCache(1000), NewCache(1000)
	dirs := make([]string, len(projects))
	for i, p := range projects {
		dirs[i] = writeProject(t, p.files)
	}
	ctx := context.Background()
	for round := range 3 {
		for i, p := range projects {
			// Each project's compiles twice: the second time from
			// the model built (unless it does not build).
			for j, o := range append(slices.Clone(p.opts), p.opts...) {
				o.Dir, o.SourceKey = dirs[i], fmt.Sprintf("m%d", i)
				o.Cache = fresh
				want := canonical(Compile(ctx, o))
				o.Cache, o.Models = cached, models
				got := canonical(Compile(ctx, o))
				if got != want {
					t.Errorf("round %d, project %d, options %d, with the built model:\n%s\nwant\n%s", round, i, j, got, want)
				}
			}
		}
	}
	// Four models kept among eight, taken in turn: each is built once a
	// round (a model with errors of evaluation too: it loads).
	if b, want := models.Builds(), 3*len(projects); b != want {
		t.Errorf("%d builds, want %d", b, want)
	}

	// One model, compiled again and again, is built once.
	one := NewModels(1)
	for range 5 {
		if _, err := Compile(ctx, Options{Dir: dirs[0], SourceKey: "s", Models: one}); err != nil {
			t.Fatal(err)
		}
	}
	if one.Builds() != 1 {
		t.Errorf("%d builds of one model compiled 5 times, want 1", one.Builds())
	}
}

// TestModelsHeapBounded: a built model compiled again and again with new
// instances (creates, as a compile worker sees them) holds on to nothing
// of each compile but what the instance cache keeps. Not parallel: it
// reads the heap.
func TestModelsHeapBounded(t *testing.T) {
	model := strings.Split(siteModel, "\tinstances: [N=string]")[0] + "}\n"
	dir := writeProject(t, map[string]string{"main.cue": model})
	cache, models := NewCache(1<<20), NewModels(1)
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	compile := func(i int) {
		insts := map[string]json.RawMessage{fmt.Sprintf("i%d", i): json.RawMessage(fmt.Sprintf(`{"name": %q, "title": "T %d"}`, letters(i), i))}
		if _, err := Compile(context.Background(), Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts},
			Cache: cache, SourceKey: "m1", Models: models}); err != nil {
			t.Fatal(err)
		}
	}
	compile(0)
	const n = 300
	before := heap()
	for i := 1; i <= n; i++ {
		compile(i)
	}
	per := (heap() - before) / n
	t.Logf("%d B a compile; %d builds", per, models.Builds())
	if per > 16<<10 || models.Builds() != 1 {
		t.Errorf("the heap grows by %d KiB a compile with a built model (want at most 16), %d builds (want 1)", per>>10, models.Builds())
	}
}
