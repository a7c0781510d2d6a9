package bounded

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// The inventory a compile reads (the facts, the service instances, their
// entity versions and related values) is sent to a worker in full the
// first time, and then as a delta: with 10,000 live instances every
// validation sent their attributes, 2-3 MB of JSON, which the worker
// decoded again, for one instance that changed.
//
// The server remembers, per worker, what it last sent for an environment
// and a source key (an invKey) and the generation it gave it; the worker
// keeps the same inventory under the same key and generation. A later
// compile for the same key on that worker sends only what changed (by
// content: the instances added or changed, the ids removed) and the
// generation it applies to; the worker applies it to its copy and
// compiles with the result. A worker without that generation of the key
// (it evicted it, or it is not the worker the server thinks) answers
// resend, and the server sends the inventory in full. A worker that died
// or was killed takes its copies with it, and the server's records of it
// go with its worker struct: the next worker starts from a full send.
//
// One environment's inventory is never read by another's compile: the
// environment is part of the key on both sides, and a delta applies only
// to the copy of its own key and generation.

// invKey names a retained inventory. The lifecycle engine compiles two
// series of inventories with one source: a validation's, focused on its
// instance, holds every live instance; an export's (or an instance
// preview's) holds its instance alone. Kept under one key, each was a
// delta of the whole other (every live instance removed, then put back),
// and a burst of creates, which alternates them, sent the inventory in
// full in all but name; so Focused, which tells them apart, is part of
// the key.
type invKey struct {
	Env     string `json:"env"`
	Source  string `json:"source"`
	Focused bool   `json:"focused,omitempty"`
}

// maxRetained is how many inventories a worker keeps (and the server
// remembers per worker), the least recently used dropped first.
const maxRetained = 4

// inventory is what a compile reads besides the model.
type inventory struct {
	Facts            map[string]map[string]json.RawMessage
	Instances        map[string]map[string]json.RawMessage
	InstanceVersions map[string]map[string]int
	Related          map[string]map[string]json.RawMessage
}

// empty reports whether the inventory has nothing.
func (inv *inventory) empty() bool {
	return len(inv.Facts) == 0 && len(inv.Instances) == 0 && len(inv.InstanceVersions) == 0 && len(inv.Related) == 0
}

// size is about how many bytes the inventory holds.
func (inv *inventory) size() int {
	n := 0
	for _, m := range []map[string]map[string]json.RawMessage{inv.Facts, inv.Instances, inv.Related} {
		for k, in := range m {
			n += len(k)
			for id, v := range in {
				n += len(id) + len(v)
			}
		}
	}
	for k, in := range inv.InstanceVersions {
		n += len(k)
		for id := range in {
			n += len(id) + 8
		}
	}
	return n
}

// delta turns base into the next inventory.
type delta struct {
	// Base is the generation of the key it applies to.
	Base             uint64                    `json:"base"`
	Facts            mapDelta[json.RawMessage] `json:"facts"`
	Instances        mapDelta[json.RawMessage] `json:"instances"`
	InstanceVersions mapDelta[int]             `json:"instance_versions"`
	Related          mapDelta[json.RawMessage] `json:"related"`
}

// mapDelta is the change of a map of maps.
type mapDelta[V any] struct {
	// Drop are the outer keys gone.
	Drop []string `json:"drop,omitempty"`
	// Set are the outer keys added or changed: an added key appears
	// (empty if its Put is).
	Set map[string]innerDelta[V] `json:"set,omitempty"`
}

// innerDelta is the change of one inner map.
type innerDelta[V any] struct {
	Put map[string]V `json:"put,omitempty"`
	Del []string     `json:"del,omitempty"`
}

// changes is how many entries d adds, changes or removes.
func (d *delta) changes() int {
	return d.Facts.changes() + d.Instances.changes() + d.InstanceVersions.changes() + d.Related.changes()
}

// changes is how many entries d adds, changes or removes.
func (d mapDelta[V]) changes() int {
	n := len(d.Drop)
	for _, in := range d.Set {
		n += len(in.Put) + len(in.Del) + 1
	}
	return n
}

// diff is the delta from old to cur (equal says whether two values are).
func diff[V any](old, cur map[string]map[string]V, equal func(a, b V) bool) mapDelta[V] {
	var d mapDelta[V]
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[k]; !ok {
			d.Drop = append(d.Drop, k)
		}
	}
	for k, in := range cur {
		was, had := old[k]
		var id innerDelta[V]
		for name, v := range in {
			if w, ok := was[name]; !ok || !equal(w, v) {
				if id.Put == nil {
					id.Put = map[string]V{}
				}
				id.Put[name] = v
			}
		}
		for name := range was {
			if _, ok := in[name]; !ok {
				id.Del = append(id.Del, name)
			}
		}
		if !had || id.Put != nil || id.Del != nil {
			if d.Set == nil {
				d.Set = map[string]innerDelta[V]{}
			}
			d.Set[k] = id
		}
	}
	return d
}

// apply changes m by d (clone copies a value kept), and returns it (a
// new map when m was nil).
func apply[V any](m map[string]map[string]V, d mapDelta[V], clone func(V) V) map[string]map[string]V {
	if m == nil {
		m = map[string]map[string]V{}
	}
	for _, k := range d.Drop {
		delete(m, k)
	}
	for k, id := range d.Set {
		in := m[k]
		if in == nil {
			in = make(map[string]V, len(id.Put))
			m[k] = in
		}
		for _, name := range id.Del {
			delete(in, name)
		}
		for name, v := range id.Put {
			in[name] = clone(v)
		}
	}
	return m
}

// copyOf is a copy of m, its values cloned.
func copyOf[V any](m map[string]map[string]V, clone func(V) V) map[string]map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]map[string]V, len(m))
	for k, in := range m {
		c := make(map[string]V, len(in))
		for name, v := range in {
			c[name] = clone(v)
		}
		out[k] = c
	}
	return out
}

func rawEqual(a, b json.RawMessage) bool         { return bytes.Equal(a, b) }
func intEqual(a, b int) bool                     { return a == b }
func rawClone(v json.RawMessage) json.RawMessage { return bytes.Clone(v) }
func same[V any](v V) V                          { return v }

// diffInventory is the delta from old (generation base) to cur.
func diffInventory(base uint64, old, cur *inventory) *delta {
	return &delta{Base: base,
		Facts:            diff(old.Facts, cur.Facts, rawEqual),
		Instances:        diff(old.Instances, cur.Instances, rawEqual),
		InstanceVersions: diff(old.InstanceVersions, cur.InstanceVersions, intEqual),
		Related:          diff(old.Related, cur.Related, rawEqual)}
}

// applyInventory changes inv by d; clone says whether the values put
// are copied (the server's record must not share the caller's).
func applyInventory(inv *inventory, d *delta, clone bool) {
	rc := same[json.RawMessage]
	if clone {
		rc = rawClone
	}
	inv.Facts = apply(inv.Facts, d.Facts, rc)
	inv.Instances = apply(inv.Instances, d.Instances, rc)
	inv.InstanceVersions = apply(inv.InstanceVersions, d.InstanceVersions, same[int])
	inv.Related = apply(inv.Related, d.Related, rc)
}

// copyInventory is a copy of inv that shares nothing with it.
func copyInventory(inv *inventory) *inventory {
	return &inventory{Facts: copyOf(inv.Facts, rawClone), Instances: copyOf(inv.Instances, rawClone),
		InstanceVersions: copyOf(inv.InstanceVersions, same[int]), Related: copyOf(inv.Related, rawClone)}
}

// retained is the inventories one side keeps of one worker, by key, the
// least recently used dropped past maxRetained.
type retained struct {
	tick    uint64
	entries map[invKey]*kept
}

// kept is one retained inventory.
type kept struct {
	gen  uint64
	used uint64
	inv  *inventory
}

// get returns the inventory of k, marking it used, or nil.
func (r *retained) get(k invKey) *kept {
	e := r.entries[k]
	if e != nil {
		r.tick++
		e.used = r.tick
	}
	return e
}

// put keeps inv as generation gen of k.
func (r *retained) put(k invKey, gen uint64, inv *inventory) {
	if r.entries == nil {
		r.entries = map[invKey]*kept{}
	}
	delete(r.entries, k)
	for len(r.entries) >= maxRetained {
		var oldest invKey
		first := true
		for key, e := range r.entries {
			if first || e.used < r.entries[oldest].used {
				oldest, first = key, false
			}
		}
		delete(r.entries, oldest)
	}
	r.tick++
	r.entries[k] = &kept{gen: gen, used: r.tick, inv: inv}
}

// clear forgets every inventory.
func (r *retained) clear() { clear(r.entries) }

// drop forgets k.
func (r *retained) drop(k invKey) { delete(r.entries, k) }

// has reports whether r keeps k.
func (r *retained) has(k invKey) bool { return r.entries[k] != nil }
