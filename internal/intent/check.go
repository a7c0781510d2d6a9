package intent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters/resource"
)

// check finds the problems of rs that are not about JSON syntax or types.
//
// trusted is set for resources DecodeBytes built: their ids and requires
// were parsed already (a zero ID marks one that failed and was reported),
// their attribute values are JSON values by construction and keys[i] is
// rs[i].ID.String() ("" for a failed id). Otherwise keys is nil and
// everything is checked.
//
// open is set for a partial export, whose resources may require resources
// it does not carry: such requires are left for MergePartial, which checks
// the merged version; everything about the requires between resources of
// rs is checked.
func check(rs []Resource, keys []string, trusted, open bool, p *problems) {
	if !trusted {
		keys = make([]string, len(rs))
		for i := range rs {
			r := &rs[i]
			for name, val := range r.Attributes {
				if tail, detail := attributeValueProblem(val, 0); detail != "" {
					p.addAt(i, detail, append([]any{"attributes", name}, tail...)...)
				}
			}
			if !utf8.ValidString(r.ResourceSet) {
				p.addAt(i, "string is not valid UTF-8", "resource_set")
			}
			if err := r.ID.Validate(); err != nil {
				p.addAt(i, err.Error(), "id")
				continue
			}
			keys[i] = r.ID.String()
			if r.ID.Version != 0 {
				p.addAt(i, versionProblem(keys[i]), "id")
				keys[i] = ""
				continue
			}
			if i > 0 && keys[i-1] != "" && keys[i-1] > keys[i] {
				p.addAt(i, fmt.Sprintf("%q must sort before %q at %s: the version is not normalised",
					keys[i], keys[i-1], p.ref(i-1)), "id")
			}
		}
	}

	index := make(map[string]int32, len(rs))
	for i, k := range keys {
		if k == "" {
			continue
		}
		if j, dup := index[k]; dup {
			p.addAt(i, fmt.Sprintf("duplicate id %q, also at %s", k, p.ref(int(j))), "id")
			continue
		}
		index[k] = int32(i)
	}

	for i := range rs {
		// A decoded resource without attributes was reported already.
		if keys[i] != "" && (rs[i].Attributes != nil || !trusted) {
			checkIdentity(p, i, &rs[i], keys[i])
		}
		if rs[i].Purged && rs[i].Undefined {
			p.addAt(i, "a purged resource cannot be undefined: removing it needs no value that is not known yet", "undefined")
		}
	}

	// The requires graph in compressed form: the targets of resource i are
	// adj[off[i]:off[i+1]].
	off := make([]int32, len(rs)+1)
	adj := make([]int32, 0, len(rs))
	for i := range rs {
		off[i] = int32(len(adj))
		prev := ""
		for j, req := range rs[i].Requires {
			if req == (resource.ID{}) && trusted {
				continue // reported while decoding
			}
			if !trusted {
				if err := req.Validate(); err != nil {
					p.addAt(i, err.Error(), "requires", j)
					continue
				}
			}
			rk := req.String()
			if req.Version != 0 {
				p.addAt(i, versionProblem(rk), "requires", j)
				continue
			}
			if !trusted && j > 0 && prev >= rk {
				p.addAt(i, fmt.Sprintf("%q must sort after %q: the requires are not normalised", rk, prev), "requires", j)
			}
			prev = rk
			if rk == keys[i] {
				p.addAt(i, "points to the resource itself", "requires", j)
				continue
			}
			t, ok := index[rk]
			if !ok {
				if !open {
					p.addAt(i, fmt.Sprintf("%q is not in this version", rk), "requires", j)
				}
				continue
			}
			if detail := setProblem(keys[i], rs[i].ResourceSet, rk, rs[t].ResourceSet); detail != "" {
				p.addAt(i, detail, "requires", j)
			}
			adj = append(adj, t)
		}
	}
	off[len(rs)] = int32(len(adj))

	for _, comp := range cycles(off, adj) {
		start, cycle := shortestCycle(comp, off, adj, keys)
		p.addAt(int(start), "requires cycle: "+describeCycle(cycle, keys), "requires")
	}
}

// setProblem checks that resource id of set may require target of
// targetSet: resources of a set may require their own set and the shared
// one, shared resources only shared ones, so that replacing one set never
// breaks the requires of another. It returns "" or what is wrong.
func setProblem(id, set, target, targetSet string) string {
	switch {
	case targetSet == "" || targetSet == set:
		return ""
	case set == "":
		return fmt.Sprintf("shared resource %q must not require %q of resource set %q: a shared resource may require only shared resources",
			id, target, targetSet)
	}
	return fmt.Sprintf("%q of resource set %q must not require %q of resource set %q: a resource may require only resources of its own set or shared ones",
		id, set, target, targetSet)
}

func versionProblem(id string) string {
	return fmt.Sprintf("%q must not carry a version", id)
}

// checkIdentity checks that the attribute the id names is there with the
// id's value.
func checkIdentity(p *problems, i int, r *Resource, key string) {
	name, want := r.ID.Attribute, r.ID.Value
	got, ok := r.Attributes[name]
	if !ok {
		p.addAt(i, fmt.Sprintf("is missing: the id %q names attribute %q", key, name), "attributes", name)
		return
	}
	switch got := got.(type) {
	case string:
		if got != want {
			p.addAt(i, fmt.Sprintf("%q does not equal the id's value %q", got, want), "attributes", name)
		}
	case json.Number:
		if string(got) != want {
			p.addAt(i, fmt.Sprintf("number %s does not equal the id's value %q", got, want), "attributes", name)
		}
	default:
		p.addAt(i, fmt.Sprintf("must be a string or number equal to the id's value %q, not %s", want, kindOf(got)), "attributes", name)
	}
}

// attributeValueProblem checks that v is one of the types the canonical
// encoding handles. It returns the first problem found: the path below v
// (built only on failure, reversed on the way up) and what is wrong.
func attributeValueProblem(v any, depth int) (tail []any, detail string) {
	if depth > maxDepth {
		return nil, fmt.Sprintf("nested deeper than %d levels", maxDepth)
	}
	switch v := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
	case string:
		if !utf8.ValidString(v) {
			return nil, "string is not valid UTF-8"
		}
	case json.Number:
		if !isJSONNumber(string(v)) {
			return nil, fmt.Sprintf("%q is not a JSON number", string(v))
		}
	case float64:
		if !finite(v) {
			return nil, fmt.Sprintf("%v is not a JSON number", v)
		}
	case float32:
		if !finite(float64(v)) {
			return nil, fmt.Sprintf("%v is not a JSON number", v)
		}
	case map[string]any:
		// Sorted, so that the problem reported is the same every time.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if tail, detail := attributeValueProblem(v[k], depth+1); detail != "" {
				return append([]any{k}, tail...), detail
			}
		}
	case []any:
		for i, e := range v {
			if tail, detail := attributeValueProblem(e, depth+1); detail != "" {
				return append([]any{i}, tail...), detail
			}
		}
	default:
		return nil, fmt.Sprintf("unsupported type %T", v)
	}
	return nil, ""
}

func finite(f float64) bool { return f-f == 0 }

// kindOf names the JSON kind of a decoded value for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	default:
		return "a number"
	}
}

// cycles returns the strongly connected components of more than one node,
// found with Tarjan's algorithm run with an explicit stack, so that a chain
// of 100k requires does not grow the goroutine stack.
func cycles(off, adj []int32) [][]int32 {
	n := len(off) - 1
	index := make([]int32, n) // 0: not visited yet; else visit order + 1
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct{ v, e int32 }
	var call []frame
	next := int32(1)
	var out [][]int32
	for s := range int32(n) {
		if index[s] != 0 {
			continue
		}
		index[s], low[s] = next, next
		next++
		stack = append(stack, s)
		onStack[s] = true
		call = append(call, frame{s, off[s]})
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.e < off[v+1] {
				w := adj[f.e]
				f.e++
				switch {
				case index[w] == 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, off[w]})
				case onStack[w] && index[w] < low[v]:
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if low[v] == index[v] {
				k := len(stack) - 1
				for stack[k] != v {
					k--
				}
				comp := stack[k:]
				for _, w := range comp {
					onStack[w] = false
				}
				if len(comp) > 1 {
					out = append(out, slices.Clone(comp))
				}
				stack = stack[:k]
			}
			if len(call) > 0 {
				if u := call[len(call)-1].v; low[v] < low[u] {
					low[u] = low[v]
				}
			}
		}
	}
	return out
}

// shortestCycle returns a shortest cycle through the member of comp with
// the smallest id, visiting requires in id order, so that the cycle
// reported does not depend on the order of the export.
func shortestCycle(comp []int32, off, adj []int32, keys []string) (int32, []int32) {
	in := make(map[int32]bool, len(comp))
	start := comp[0]
	for _, v := range comp {
		in[v] = true
		if keys[v] < keys[start] {
			start = v
		}
	}
	parent := map[int32]int32{start: -1}
	queue := []int32{start}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		var next []int32
		for _, w := range adj[off[u]:off[u+1]] {
			if in[w] {
				next = append(next, w)
			}
		}
		slices.SortFunc(next, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
		for _, w := range next {
			if w == start {
				var cycle []int32
				for x := u; x != -1; x = parent[x] {
					cycle = append(cycle, x)
				}
				slices.Reverse(cycle)
				return start, append(cycle, start)
			}
			if _, seen := parent[w]; !seen {
				parent[w] = u
				queue = append(queue, w)
			}
		}
	}
	panic("intent: strongly connected component without a cycle")
}

// maxCycleIDs is how many ids of a cycle a message spells out.
const maxCycleIDs = 20

// describeCycle writes "a → b → a", eliding the middle of long cycles.
func describeCycle(cycle []int32, keys []string) string {
	var b strings.Builder
	for i, v := range cycle {
		if len(cycle) > maxCycleIDs && i == maxCycleIDs-2 {
			fmt.Fprintf(&b, " → … %d more …", len(cycle)-maxCycleIDs)
		}
		if len(cycle) > maxCycleIDs && i >= maxCycleIDs-2 && i < len(cycle)-2 {
			continue
		}
		if i > 0 {
			b.WriteString(" → ")
		}
		b.WriteString(keys[v])
	}
	return b.String()
}
