package bounded

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/compiler"
)

// inventoryModel reads every part of an inventory: instances of two
// entities, the entity version of each (vm at version 2, keeping 1), the
// related value of an alias, and the facts (copy is undefined until the
// seed's content_hash is known).
const inventoryModel = `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
	"intend.dev/std/resource"
)

facts: resource.#Facts

resources: {
	seed: fs.#File & {path: "/seed", content: "x"}
	copy: fs.#File & {path: "/copy", content: "hash \(facts[seed.id].content_hash)"}
}

#V1: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {name: string @lsm(rw), memory: int @lsm(rw+)}
	output: f: fs.#File & {path: "/v/\(parameter.name)", content: "v1 memory=\(parameter.memory)"}
}

#V2: lsm.#Entity & {
	version:   2
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {name: string @lsm(rw), ram: int & <=32 @lsm(rw+)}
	migrate: {from: _, to: {name: from.name, ram: from.memory * 2}}
	output: f: fs.#File & {path: "/v/\(parameter.name)", content: "v2 ram=\(parameter.ram)"}
}

services: vm: #V2 & {previous: [#V1]}

services: alias: lsm.#Entity & {
	lifecycle: lsm.simple
	parameter: {
		name: string @lsm(rw)
		site: string @lsm(rw, ref=vm)
	}
	related: site: _
	output: f: fs.#File & {path: "/alias/\(parameter.name)", content: "\(related.site.name) \(related.site.port)"}
}
`

// outcome is a compile's outcome as the worker's wire form gives it: the
// result without its time (origins included), or the error.
func outcome(res *compiler.Result, err error) string {
	if err != nil {
		if errs, ok := errors.AsType[compiler.Errors](err); ok {
			b, _ := json.Marshal(errs)
			return "errors: " + string(b)
		}
		return "error: " + err.Error()
	}
	w := toWire(res)
	w.Took = 0
	b, err := json.Marshal(w)
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	return string(b)
}

// randomInventory changes an inventory at random, a step at a time. Its
// JSON is compact, as it reaches a worker (positions in an instance's
// JSON are those of the compact text; the compiler in this process would
// otherwise name other columns).
type randomInventory struct {
	r   *rand.Rand
	inv inventory
}

func (ri *randomInventory) put(m *map[string]map[string]json.RawMessage, outer, inner, value string) {
	if *m == nil {
		*m = map[string]map[string]json.RawMessage{}
	}
	if (*m)[outer] == nil {
		(*m)[outer] = map[string]json.RawMessage{}
	}
	(*m)[outer][inner] = json.RawMessage(value)
}

// pick is an id of m[outer], or "".
func (ri *randomInventory) pick(m map[string]map[string]json.RawMessage, outer string) string {
	ids := make([]string, 0, len(m[outer]))
	for id := range m[outer] {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return ""
	}
	// Map order is random; sort for a sequence the seed decides.
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	return ids[ri.r.IntN(len(ids))]
}

// step makes one change, in place: the maps a caller passes change
// between compiles as the store's do.
func (ri *randomInventory) step() string {
	r, inv := ri.r, &ri.inv
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"} // few: duplicate ids happen
	name := names[r.IntN(len(names))]
	switch k := r.IntN(12); k {
	case 0, 1: // a vm created or updated, at version 2 (sometimes past ram's bound)
		id := fmt.Sprintf("vm%d", r.IntN(12))
		ri.put(&inv.Instances, "vm", id, fmt.Sprintf(`{"name":%q,"ram":%d}`, name, 1+r.IntN(34)))
		if inv.InstanceVersions != nil && inv.InstanceVersions["vm"] != nil {
			delete(inv.InstanceVersions["vm"], id)
		}
		return "vm v2 " + id
	case 2: // a vm at version 1
		id := fmt.Sprintf("vm%d", r.IntN(12))
		ri.put(&inv.Instances, "vm", id, fmt.Sprintf(`{"name":%q,"memory":%d}`, name, r.IntN(9)))
		if inv.InstanceVersions == nil {
			inv.InstanceVersions = map[string]map[string]int{}
		}
		if inv.InstanceVersions["vm"] == nil {
			inv.InstanceVersions["vm"] = map[string]int{}
		}
		inv.InstanceVersions["vm"][id] = 1
		return "vm v1 " + id
	case 3, 4: // a vm deleted
		if id := ri.pick(inv.Instances, "vm"); id != "" {
			delete(inv.Instances["vm"], id)
			if inv.InstanceVersions["vm"] != nil {
				delete(inv.InstanceVersions["vm"], id)
			}
			return "vm deleted " + id
		}
	case 5: // a version changed under an instance (an error when its attributes are not of it)
		if id := ri.pick(inv.Instances, "vm"); id != "" {
			if inv.InstanceVersions == nil {
				inv.InstanceVersions = map[string]map[string]int{}
			}
			if inv.InstanceVersions["vm"] == nil {
				inv.InstanceVersions["vm"] = map[string]int{}
			}
			inv.InstanceVersions["vm"][id] = 1 + r.IntN(3)
			return "version " + id
		}
	case 6, 7: // an alias created or updated, with its related site
		id := fmt.Sprintf("al%d", r.IntN(6))
		ri.put(&inv.Instances, "alias", id, fmt.Sprintf(`{"name":%q,"site":"vm%d"}`, name, r.IntN(12)))
		if r.IntN(5) > 0 {
			ri.put(&inv.Related, "alias", id, fmt.Sprintf(`{"site":{"name":%q,"port":%d}}`, names[r.IntN(len(names))], r.IntN(3)))
		} else if inv.Related["alias"] != nil {
			delete(inv.Related["alias"], id) // no related: an error of the instance
		}
		return "alias " + id
	case 8: // an alias deleted
		if id := ri.pick(inv.Instances, "alias"); id != "" {
			delete(inv.Instances["alias"], id)
			if inv.Related["alias"] != nil {
				delete(inv.Related["alias"], id)
			}
			return "alias deleted " + id
		}
	case 9: // facts reported, changed or gone
		const seed = "fs::File[localhost,path=/seed]"
		switch r.IntN(3) {
		case 0:
			ri.put(&inv.Facts, seed, "content_hash", fmt.Sprintf(`"sha256:%d"`, r.IntN(4)))
		case 1:
			ri.put(&inv.Facts, seed, "size", fmt.Sprintf(`%d`, r.IntN(4)))
		default:
			delete(inv.Facts, seed)
		}
		return "facts"
	case 10: // an entity's instances all gone, its key with them, or left empty
		outer := []string{"vm", "alias"}[r.IntN(2)]
		if r.IntN(2) == 0 {
			delete(inv.Instances, outer)
			delete(inv.Related, outer)
			delete(inv.InstanceVersions, outer)
		} else if inv.Instances != nil {
			inv.Instances[outer] = map[string]json.RawMessage{}
		}
		return "entity cleared " + outer
	case 11: // instances of an entity the model lacks come and go
		if inv.Instances["nosuch"] != nil {
			delete(inv.Instances, "nosuch")
		} else {
			ri.put(&inv.Instances, "nosuch", "x", `{}`)
		}
		return "nosuch"
	}
	return "nothing"
}

// TestDeltaCompilesAsFull: random sequences of inventory changes (instances
// created, updated, deleted, at other entity versions, related values
// and facts changing, whole entities gone), each compiled by a pool that
// sends the worker deltas, give byte for byte what the compiler gives
// with the whole inventory in this process; and the pool did send
// deltas. A worker that misapplies a delta (drops a removal, say) fails
// it.
func TestDeltaCompilesAsFull(t *testing.T) {
	t.Parallel()
	p := &Pool{Workers: 1, CacheResources: 10000}
	defer p.Close()
	dir := writeProject(t, inventoryModel)
	ctx := context.Background()
	steps, fulls := 0, 0
	for seed := range uint64(4) {
		ri := &randomInventory{r: rand.New(rand.NewPCG(seed, 28))}
		// Anything yet, focused or not (each is its own series): an
		// empty inventory is sent in full, and not kept.
		sent := map[bool]bool{}
		for i := range 60 {
			what := ri.step()
			opts := compiler.Options{Dir: dir, Facts: ri.inv.Facts, Instances: ri.inv.Instances, InstanceVersions: ri.inv.InstanceVersions,
				Related: ri.inv.Related, SourceKey: "src1"}
			if i%3 == 0 {
				if id := ri.pick(ri.inv.Instances, "vm"); id != "" {
					opts.Focus = &compiler.Focus{Entity: "vm", Instance: id}
				}
			}
			if focused := opts.Focus != nil; !sent[focused] {
				fulls++
				sent[focused] = !ri.inv.empty()
			}
			want := outcome(compiler.Compile(ctx, opts))
			opts.Cache = compiler.NewCache(1) // the worker's cache, as the lifecycle engine asks for it
			got := outcome(p.Compile(ctx, opts, compiler.Job{Environment: fmt.Sprintf("env%d", seed), Timeout: time.Minute}))
			if got != want {
				t.Fatalf("seed %d, step %d (%s): the worker compiled\n%s\nwant\n%s", seed, i, what, got, want)
			}
			steps++
		}
	}
	t.Logf("%d compiles: %d inventories sent in full, %d as deltas, %d sent again", steps, p.fulls.Load(), p.deltas.Load(), p.resends.Load())
	if p.fulls.Load() != int64(fulls) || p.deltas.Load() != int64(steps-fulls) || p.resends.Load() != 0 {
		t.Errorf("%d full, %d deltas, %d resends; want %d full (the first of each environment, focused or not), the rest deltas",
			p.fulls.Load(), p.deltas.Load(), p.resends.Load(), fulls)
	}
}

// TestDeltaFallsBackToFull: a worker that no longer keeps what the server
// thinks (it was killed and a new one started, or its copy is of another
// generation) gets the whole inventory, and compiles right.
func TestDeltaFallsBackToFull(t *testing.T) {
	t.Parallel()
	p := &Pool{Workers: 1, CacheResources: 10000}
	defer p.Close()
	dir := writeProject(t, inventoryModel)
	ctx := context.Background()
	ri := &randomInventory{r: rand.New(rand.NewPCG(7, 28))}
	compile := func(why string) {
		t.Helper()
		ri.step()
		opts := compiler.Options{Dir: dir, Facts: ri.inv.Facts, Instances: ri.inv.Instances, InstanceVersions: ri.inv.InstanceVersions,
			Related: ri.inv.Related, SourceKey: "src1"}
		want := outcome(compiler.Compile(ctx, opts))
		opts.Cache = compiler.NewCache(1)
		if got := outcome(p.Compile(ctx, opts, compiler.Job{Environment: "e", Timeout: time.Minute})); got != want {
			t.Fatalf("%s: the worker compiled\n%s\nwant\n%s", why, got, want)
		}
	}
	idle := func() *worker {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.idle) != 1 {
			t.Fatalf("%d idle workers, want 1", len(p.idle))
		}
		return p.idle[0]
	}
	for range 3 {
		compile("warm up")
	}
	if p.fulls.Load() != 1 || p.deltas.Load() != 2 {
		t.Fatalf("%d full, %d deltas; want 1 and 2", p.fulls.Load(), p.deltas.Load())
	}

	// Killed (as past its memory or CPU limit): the next worker starts
	// from the whole inventory.
	idle().stop()
	compile("after the worker was killed")
	if p.fulls.Load() != 2 || p.resends.Load() != 0 {
		t.Errorf("after a kill: %d full, %d resends; want a second full send", p.fulls.Load(), p.resends.Load())
	}

	// The server's record says another generation than the worker's
	// copy: the worker refuses the delta, and gets the inventory again.
	w := idle()
	w.sent.get(invKey{Env: "e", Source: "src1"}).gen += 1000
	compile("after a generation mismatch")
	if p.resends.Load() != 1 || p.fulls.Load() != 3 {
		t.Errorf("after a mismatch: %d full, %d resends; want one resend answered in full", p.fulls.Load(), p.resends.Load())
	}
	compile("after the resend")
	if p.deltas.Load() < 4 {
		t.Errorf("%d deltas: the pool did not go back to deltas", p.deltas.Load())
	}

	// A compile that is not the lifecycle engine's (no cache: an upload,
	// a preview's chunk) is sent in full and not kept.
	fulls, deltas := p.fulls.Load(), p.deltas.Load()
	for range 2 {
		opts := compiler.Options{Dir: dir, Instances: ri.inv.Instances, InstanceVersions: ri.inv.InstanceVersions,
			Related: ri.inv.Related, Facts: ri.inv.Facts, SourceKey: "preview"}
		want := outcome(compiler.Compile(ctx, opts))
		if got := outcome(p.Compile(ctx, opts, compiler.Job{Environment: "e", Timeout: time.Minute})); got != want {
			t.Fatalf("without the cache: the worker compiled\n%s\nwant\n%s", got, want)
		}
	}
	if p.fulls.Load() != fulls+2 || p.deltas.Load() != deltas || idle().sent.has(invKey{Env: "e", Source: "preview"}) {
		t.Errorf("compiles without the cache: %d full, %d deltas more; want 2 full, none kept", p.fulls.Load()-fulls, p.deltas.Load()-deltas)
	}
}

// TestDeltaKeepsValidationsApartFromExports: a burst of creates
// alternates a validation (focused on its instance, every live instance
// in the inventory) and an export (its instance alone) on one source.
// Each validation's delta carries the instance it adds, not every live
// instance again: the export's inventory is not the validation's base.
func TestDeltaKeepsValidationsApartFromExports(t *testing.T) {
	t.Parallel()
	p := &Pool{Workers: 1, CacheResources: 10000}
	defer p.Close()
	dir := writeProject(t, inventoryModel)
	ctx := context.Background()
	const live = 40
	all := map[string]map[string]json.RawMessage{"vm": {}}
	for i := range live {
		all["vm"][fmt.Sprintf("i%03d", i)] = json.RawMessage(fmt.Sprintf(`{"name":"n%03d","ram":1}`, i))
	}
	compile := func(opts compiler.Options) {
		t.Helper()
		want := outcome(compiler.Compile(ctx, opts))
		opts.Cache = compiler.NewCache(1)
		if got := outcome(p.Compile(ctx, opts, compiler.Job{Environment: "e", Timeout: time.Minute})); got != want {
			t.Fatalf("the worker compiled\n%s\nwant\n%s", got, want)
		}
	}
	for i := range 4 {
		id := fmt.Sprintf("new%d", i)
		attrs := json.RawMessage(fmt.Sprintf(`{"name":"new%d","ram":2}`, i))
		all["vm"][id] = attrs
		before, deltas := p.changes.Load(), p.deltas.Load()
		compile(compiler.Options{Dir: dir, Instances: all, SourceKey: "src1", Focus: &compiler.Focus{Entity: "vm", Instance: id}})
		if i > 0 {
			if p.deltas.Load() != deltas+1 {
				t.Fatalf("validation %d was sent in full", i)
			}
			if n := p.changes.Load() - before; n > 2 {
				t.Errorf("validation %d: its delta carried %d entries; want the instance it adds (the inventory of %d live instances sent again)", i, n, live+i)
			}
		}
		compile(compiler.Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"vm": {id: attrs}}, SourceKey: "src1"})
	}
}

// TestDeltaKeepsEnvironmentsApart: environments with the same model
// source (the same source key) compiling on one worker each see their
// own inventory alone; and a worker refuses a delta for one environment
// based on the generation it keeps for another.
func TestDeltaKeepsEnvironmentsApart(t *testing.T) {
	t.Parallel()
	p := &Pool{Workers: 1, CacheResources: 10000}
	defer p.Close()
	dir := writeProject(t, inventoryModel)
	ctx := context.Background()
	envs := map[string]*randomInventory{}
	for i, env := range []string{"A", "B", "C"} {
		envs[env] = &randomInventory{r: rand.New(rand.NewPCG(uint64(i), 99))}
	}
	for i := range 45 {
		env := []string{"A", "B", "C"}[i%3]
		ri := envs[env]
		ri.step()
		// Each environment's ids are its own.
		inst := fmt.Sprintf("only%s%d", env, i)
		ri.put(&ri.inv.Instances, "vm", inst, fmt.Sprintf(`{"name":"own%s%d","ram":1}`, strings.ToLower(env), i))
		opts := compiler.Options{Dir: dir, Facts: ri.inv.Facts, Instances: ri.inv.Instances, InstanceVersions: ri.inv.InstanceVersions,
			Related: ri.inv.Related, SourceKey: "same"}
		want := outcome(compiler.Compile(ctx, opts))
		opts.Cache = compiler.NewCache(1)
		res, err := p.Compile(ctx, opts, compiler.Job{Environment: env, Timeout: time.Minute})
		if got := outcome(res, err); got != want {
			t.Fatalf("step %d, environment %s: the worker compiled\n%s\nwant\n%s", i, env, got, want)
		}
		for _, other := range []string{"A", "B", "C"} {
			if other != env && strings.Contains(outcome(res, err), "only"+other) {
				t.Fatalf("environment %s's compile has instances of %s", env, other)
			}
		}
	}
	if p.deltas.Load() < 40 {
		t.Errorf("%d deltas among 45 compiles of 3 environments on one worker", p.deltas.Load())
	}

	// The worker itself: A's inventory kept as generation 1; a delta for
	// B (same source) on generation 1 is refused, not applied to A's.
	in, toWorker := io.Pipe()
	fromWorker, out := io.Pipe()
	go func() { _ = serve(in, out, compiler.NewCache(100), nil, 1<<30); out.Close() }()
	enc, dec := json.NewEncoder(toWorker), json.NewDecoder(bufio.NewReader(fromWorker))
	ask := func(req request) response {
		t.Helper()
		if err := enc.Encode(req); err != nil {
			t.Fatal(err)
		}
		var resp response
		if err := dec.Decode(&resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a := map[string]map[string]json.RawMessage{"vm": {"secretA": json.RawMessage(`{"name": "secret", "ram": 1}`)}}
	if resp := ask(request{Dir: dir, SourceKey: "same", UseCache: true, Env: "A", Gen: 1, Instances: a}); !resp.Kept || resp.Result == nil {
		t.Fatalf("A in full: %+v", resp)
	}
	bDelta := &delta{Base: 1, Instances: mapDelta[json.RawMessage]{Set: map[string]innerDelta[json.RawMessage]{
		"vm": {Put: map[string]json.RawMessage{"b1": json.RawMessage(`{"name": "bee", "ram": 2}`)}}}}}
	resp := ask(request{Dir: dir, SourceKey: "same", UseCache: true, Env: "B", Gen: 2, Delta: bDelta})
	if !resp.Resend || resp.Result != nil || resp.Kept {
		b, _ := json.Marshal(resp)
		t.Fatalf("B's delta on A's generation = %s, want a resend and nothing compiled", b)
	}
	// The same delta for A applies to A's copy.
	resp = ask(request{Dir: dir, SourceKey: "same", UseCache: true, Env: "A", Gen: 3, Delta: bDelta})
	if resp.Result == nil || resp.Result.Instances != 2 || !resp.Kept {
		b, _ := json.Marshal(resp)
		t.Fatalf("A's delta = %s, want 2 instances compiled", b)
	}
	toWorker.Close()
}

// BenchmarkPoolValidationTenThousand: a validation's compile in a worker,
// one instance changed among 10,000 live ones, focused on it, the
// inventory sent as a delta (Delta) or in full each time (Full, as
// before deltas). The instances are of a plain refinement (a service
// entity's instance costs milliseconds to evaluate the first time, and
// the benchmark measures the compiles after: all but one instance from
// the worker's cache).
func BenchmarkPoolValidationTenThousandDelta(b *testing.B) { benchmarkPoolValidation(b, 10000, false) }
func BenchmarkPoolValidationTenThousandFull(b *testing.B)  { benchmarkPoolValidation(b, 10000, true) }

func benchmarkPoolValidation(b *testing.B, n int, full bool) {
	dir := b.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: test\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	p := &Pool{Workers: 1, CacheResources: 1 << 17, noDelta: full}
	defer p.Close()
	insts := map[string]json.RawMessage{}
	for i := range n {
		insts[fmt.Sprintf("s%d", i)] = json.RawMessage(fmt.Sprintf(`{"name":"n%d"}`, i))
	}
	opts := compiler.Options{Dir: dir, Instances: map[string]map[string]json.RawMessage{"site": insts}, SourceKey: "src",
		Cache: compiler.NewCache(1), Focus: &compiler.Focus{Entity: "site", Instance: "s0"}}
	job := compiler.Job{Environment: "e", Timeout: time.Minute}
	if _, err := p.Compile(context.Background(), opts, job); err != nil {
		b.Fatal(err)
	}
	p.mu.Lock()
	pid := p.idle[0].cmd.Process.Pid
	p.mu.Unlock()
	workerCPU := func() time.Duration {
		// utime and stime, fields 14 and 15 of /proc/<pid>/stat, in
		// clock ticks (100 a second).
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		var u, s int64
		fmt.Sscan(f[11], &u)
		fmt.Sscan(f[12], &s)
		return time.Duration(u+s) * 10 * time.Millisecond
	}
	w0, s0 := workerCPU(), processCPU()
	b.ResetTimer()
	defer func() {
		b.ReportMetric(float64((workerCPU()-w0).Microseconds())/1000/float64(b.N), "worker-cpu-ms/op")
		b.ReportMetric(float64((processCPU()-s0).Microseconds())/1000/float64(b.N), "server-cpu-ms/op")
	}()
	for i := 0; b.Loop(); i++ {
		insts["s0"] = json.RawMessage(fmt.Sprintf(`{"name":"changed%d"}`, i%100))
		res, err := p.Compile(context.Background(), opts, job)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Resources) != 1 {
			b.Fatalf("%d resources", len(res.Resources))
		}
	}
}
