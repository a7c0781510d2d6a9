// Package intent decodes, validates and hashes the export of one
// desired-state version: the set of resources an environment should have,
// with their attributes and the order in which they must be deployed.
//
// An export is the JSON document
//
//	{"resources": [
//	  {"id": "fs::File[localhost,path=/tmp/a]",
//	   "attributes": {"path": "/tmp/a", "content": "hi"},
//	   "requires": ["fs::File[localhost,path=/tmp/b]"],
//	   "purged": false, "send_event": false,
//	   "receive_events": false, "report_only": false,
//	   "undefined": false, "resource_set": "web"}
//	]}
//
// An "undefined" resource is one whose attributes depend on values not
// known yet (a fact an adapter has not reported): its attributes may be
// incomplete, but still hold the attribute its id names. The orchestrator
// never deploys it and skips the resources that require it; a later
// version that defines it resolves them. A purged resource cannot be
// undefined: removing it needs no unknown value.
//
// A resource without "resource_set" belongs to the shared set. A resource
// of a set may require only resources of its own set and shared ones; a
// shared resource only shared ones. Sets are what a partial export
// (DecodePartial, MergePartial) replaces one at a time.
//
// Decoding is strict, because an export that is silently misread deploys the
// wrong thing: unknown or duplicate keys, wrong JSON types, invalid UTF-8 and
// unpaired surrogate escapes are refused, and every problem is reported with
// the JSON pointer (RFC 6901) of where it is, not only the first one. Numbers
// in attributes keep their text (as json.Number), so "420" and "420.0" stay
// different and nothing is lost to float64.
//
// A Version from DecodeBytes is normalised: resources are sorted by id,
// each resource's requires are sorted and free of duplicates. Attribute
// values may nest at most 1000 levels deep.
//
// Resource.Hash is the intent hash: equal for equal intent however the
// export spelled it, and the way to tell which resources a new version
// changes.
package intent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters/resource"
)

// Resource is the desired state of one resource in a version.
type Resource struct {
	// ID names the resource; it never carries a version.
	ID resource.ID
	// Attributes is the desired state as decoded JSON: map[string]any,
	// []any, string, json.Number, bool or nil. It holds the attribute named
	// by the id, with the id's value.
	Attributes map[string]any
	// Requires lists the resources that must be deployed before this one,
	// sorted by id and without duplicates; all of them are in the same
	// version and none carries a version. (DecodePartial keeps them as
	// written, and a partial export may require resources it does not
	// carry.)
	Requires []resource.ID
	// Purged asks for the resource to be removed.
	Purged bool
	// SendEvent makes a change of this resource notify the resources that
	// require it.
	SendEvent bool
	// ReceiveEvents lets this resource react to events of the resources it
	// requires.
	ReceiveEvents bool
	// ReportOnly asks for the difference to be reported and not applied.
	ReportOnly bool
	// Undefined marks a resource whose attributes depend on values not
	// known yet: they may be incomplete (the id's attribute is always
	// there). It is never deployed, and neither is anything that
	// requires it, directly or not, until a version defines it. A purged
	// resource cannot be undefined.
	Undefined bool
	// ResourceSet names the resource set the resource belongs to; "" is
	// the shared set. A partial export replaces whole sets, so a resource
	// may require only resources of its own set or shared ones, and a
	// shared resource only shared ones.
	ResourceSet string
}

// Agent returns the agent that deploys the resource.
func (r Resource) Agent() string { return r.ID.Agent }

// Version is the desired state of an environment: all of its resources,
// sorted by id string.
type Version struct {
	Resources []Resource
}

// Agents returns the agents that have resources in the version, sorted and
// without duplicates.
func (v Version) Agents() []string {
	var out []string
	for _, r := range v.Resources {
		out = append(out, r.ID.Agent)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MaxProblems is the number of problems a ValidationError keeps; the rest
// are only counted, so a broken export of 100k resources gives a readable
// error of bounded size.
const MaxProblems = 100

// maxDepth bounds the nesting of attribute values, so that neither the
// decoder nor the canonical encoder can be driven into exhausting the stack.
const maxDepth = 1000

// FieldProblem is one thing wrong with an export.
type FieldProblem struct {
	// Path is the RFC 6901 JSON pointer of the offending value, e.g.
	// "/resources/3/requires/0"; "" is the whole document. For a missing
	// member it points where the member should be.
	Path string
	// Detail says what is wrong, quoting the offending text.
	Detail string
}

// ValidationError reports every problem found in an export or a Version.
type ValidationError struct {
	// Problems holds the first MaxProblems problems, sorted by Path (array
	// indexes compared as numbers) and then by Detail.
	Problems []FieldProblem
	// Omitted counts the problems that were found beyond MaxProblems.
	Omitted int
}

// summaryProblems is how many problems Error spells out.
const summaryProblems = 5

// Error summarises the problems, e.g.
// `2 problems: /resources/3/id: ...; /resources/4/requires/0: ...`.
func (e *ValidationError) Error() string {
	n := len(e.Problems) + e.Omitted
	var b strings.Builder
	b.WriteString(strconv.Itoa(n))
	if n == 1 {
		b.WriteString(" problem: ")
	} else {
		b.WriteString(" problems: ")
	}
	for i, p := range e.Problems {
		if i == summaryProblems {
			fmt.Fprintf(&b, "; and %d more", n-summaryProblems)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if p.Path == "" {
			b.WriteString("(document)")
		} else {
			b.WriteString(p.Path)
		}
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	return b.String()
}

// problems collects FieldProblems.
type problems struct {
	list []FieldProblem
	// at, when set, says where the resource at index i of the slice being
	// checked comes from: its JSON pointer with tail appended, or, for a
	// resource that is not in the document, "" and a name for it that
	// goes in front of the detail. Nil means pointer("resources", i,
	// tail...). (MergePartial checks a merged version but reports
	// problems against the partial export.)
	at func(i int, tail []any) (ptr, name string)
}

func (p *problems) add(path, detail string) {
	p.list = append(p.list, FieldProblem{Path: path, Detail: detail})
}

// addAt records a problem with the resource at index i, tail being the
// path below it.
func (p *problems) addAt(i int, detail string, tail ...any) {
	if p.at == nil {
		p.add(pointer(append([]any{"resources", i}, tail...)...), detail)
		return
	}
	ptr, name := p.at(i, tail)
	if name != "" {
		detail = name + ": " + detail
	}
	p.add(ptr, detail)
}

// ref names the resource at index i inside a detail.
func (p *problems) ref(i int) string {
	if p.at == nil {
		return pointer("resources", i)
	}
	ptr, name := p.at(i, nil)
	if name != "" {
		return name
	}
	return ptr
}

// err returns nil or the *ValidationError of the problems, sorted and capped.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortFunc(p.list, func(a, b FieldProblem) int {
		if c := comparePointers(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	p.list = slices.Compact(p.list)
	e := &ValidationError{Problems: p.list}
	if len(p.list) > MaxProblems {
		e.Problems = slices.Clip(p.list[:MaxProblems])
		e.Omitted = len(p.list) - MaxProblems
	}
	return e
}

// comparePointers orders JSON pointers token by token, comparing tokens
// that are both array indexes as numbers, so /resources/9 sorts before
// /resources/10.
func comparePointers(a, b string) int {
	for a != "" && b != "" {
		var ta, tb string
		ta, a = nextToken(a)
		tb, b = nextToken(b)
		if isIndex(ta) && isIndex(tb) && len(ta) != len(tb) {
			return len(ta) - len(tb)
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

// nextToken splits "/a/b" into "a" and "/b".
func nextToken(p string) (tok, rest string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

func isIndex(tok string) bool {
	if tok == "" || tok[0] == '0' && len(tok) > 1 {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}

// pointer builds a JSON pointer from tokens: strings are member names,
// ints array indexes.
func pointer(tokens ...any) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		switch t := t.(type) {
		case int:
			b.WriteString(strconv.Itoa(t))
		case string:
			escapePointerToken(&b, t)
		}
	}
	return b.String()
}

func escapePointerToken(b *strings.Builder, t string) {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(t[i])
		}
	}
}

// Decode reads a version export from r and decodes it with DecodeBytes.
// The caller bounds the size of r (http.MaxBytesReader for request bodies).
func Decode(r io.Reader) (Version, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Version{}, fmt.Errorf("read version export: %w", err)
	}
	return DecodeBytes(b)
}

// DecodeBytes decodes and validates a version export. An invalid export is
// refused with a *ValidationError that lists every problem found: malformed
// JSON (which stops decoding), wrong members or types, and everything
// Version.Validate checks. The returned Version is normalised.
//
// DecodeBytes does not keep b.
func DecodeBytes(b []byte) (Version, error) {
	d := newDecoder(b)
	d.document()
	if d.syntaxFailed {
		return Version{}, d.probs.err()
	}
	check(d.resources, d.keys, true, false, &d.probs)
	if err := d.probs.err(); err != nil {
		return Version{}, err
	}
	normalize(d.resources, d.keys)
	return Version{Resources: d.resources}, nil
}

// Validate checks v: every id and require parses and carries no version;
// ids are unique; each resource's attributes hold the attribute its id names
// with the id's value (a string equal to it, or a number whose JSON text
// equals it); requires name other resources of v and form no cycle; a
// resource of a set requires only resources of its set or shared ones, a
// shared resource only shared ones; resource set names are valid UTF-8;
// attribute values are JSON values (nil, bool, string, valid json.Number,
// finite floats, integers, map[string]any, []any); no resource is both
// purged and undefined; and v is normalised. It returns nil or a
// *ValidationError listing every problem, with paths as in the export of v.
func (v Version) Validate() error {
	var p problems
	check(v.Resources, nil, false, false, &p)
	return p.err()
}

// Normalize sorts the resources of v by id string and the requires of each
// resource, dropping duplicate requires. It changes the slices of v in
// place.
func (v Version) Normalize() {
	keys := make([]string, len(v.Resources))
	for i := range v.Resources {
		keys[i] = v.Resources[i].ID.String()
	}
	normalize(v.Resources, keys)
}

// normalize is Normalize with keys[i] == rs[i].ID.String() given.
func normalize(rs []Resource, keys []string) {
	for i := range rs {
		if r := &rs[i]; len(r.Requires) > 1 {
			r.Requires = sortIDs(r.Requires)
		}
	}
	if slices.IsSorted(keys) {
		return
	}
	perm := make([]int32, len(rs))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	sorted := make([]Resource, len(rs))
	for i, j := range perm {
		sorted[i] = rs[j]
	}
	copy(rs, sorted)
}

// sortIDs sorts ids by their string and drops duplicates, reusing ids'
// backing array.
func sortIDs(ids []resource.ID) []resource.ID {
	type keyed struct {
		key string
		id  resource.ID
	}
	ks := make([]keyed, len(ids))
	for i, id := range ids {
		ks[i] = keyed{id.String(), id}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	ks = slices.CompactFunc(ks, func(a, b keyed) bool { return a.key == b.key })
	out := ids[:len(ks)]
	for i := range ks {
		out[i] = ks[i].id
	}
	clear(ids[len(ks):])
	return out
}

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

// decoder is a strict, single-pass JSON decoder for version exports. It is
// hand-written rather than built on encoding/json because it must report
// every problem with its JSON pointer, refuse duplicate keys and invalid
// UTF-8 (encoding/json accepts both silently) and decode 100k resources in
// a fraction of a second.
type decoder struct {
	data []byte
	pos  int
	// partial accepts "removed_resource_sets" beside "resources"
	// (DecodePartial); it is decoded into removed.
	partial bool
	removed []string
	// path is the JSON pointer of the value being decoded.
	path []token

	probs        problems
	syntaxFailed bool

	resources []Resource
	keys      []string // keys[i] is the id string of resources[i], "" if it failed

	// names interns member names of attribute objects: 100k resources of
	// a type share a handful of attribute names.
	names map[string]string
}

// newDecoder returns a decoder of b with room for its resources: sized
// from the number of "id" members (bounded by the smallest possible
// resource object), to spare the copies of append growth.
func newDecoder(b []byte) *decoder {
	n := min(bytes.Count(b, []byte(`"id"`)), len(b)/40)
	return &decoder{data: b, resources: make([]Resource, 0, n), keys: make([]string, 0, n)}
}

// maxNames bounds d.names, so that an export of unique names costs no more
// than one without interning.
const maxNames = 1024

// name returns the member name k as a string, interned.
func (d *decoder) name(k []byte) string {
	if s, ok := d.names[string(k)]; ok {
		return s
	}
	s := string(k)
	if len(d.names) < maxNames {
		if d.names == nil {
			d.names = make(map[string]string)
		}
		d.names[s] = s
	}
	return s
}

// token is one step of a JSON pointer: a member name, or an array index
// when index >= 0. (Not an any, which would allocate for every index.)
type token struct {
	name  string
	index int
}

// pointer returns the JSON pointer of the current path.
func (d *decoder) pointer() string {
	var b strings.Builder
	for _, t := range d.path {
		b.WriteByte('/')
		if t.index >= 0 {
			b.WriteString(strconv.Itoa(t.index))
		} else {
			escapePointerToken(&b, t.name)
		}
	}
	return b.String()
}

// errSyntax stops decoding; the problem is already recorded.
var errSyntax = errors.New("invalid JSON")

// fail records a syntax problem at the current position and returns
// errSyntax.
func (d *decoder) fail(msg string) error {
	d.syntaxFailed = true
	d.probs.add(d.pointer(), fmt.Sprintf("invalid JSON at byte %d: %s", d.pos, msg))
	return errSyntax
}

// problem records a problem with the value at the current path.
func (d *decoder) problem(detail string) { d.probs.add(d.pointer(), detail) }

func (d *decoder) pushName(name string) { d.path = append(d.path, token{name: name, index: -1}) }
func (d *decoder) pushIndex(i int)      { d.path = append(d.path, token{index: i}) }
func (d *decoder) pop()                 { d.path = d.path[:len(d.path)-1] }

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, or 0 at the end of the
// input (which atEnd tells apart from a NUL byte).
func (d *decoder) peek() byte {
	d.skipSpace()
	if d.atEnd() {
		return 0
	}
	return d.data[d.pos]
}

func (d *decoder) atEnd() bool { return d.pos == len(d.data) }

// kindAt names the JSON kind of the value starting with c, for messages;
// "" when no value starts with c.
func kindAt(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return ""
}

// wrongKind records that the value at the current path must be want, and
// skips it. A value that is not JSON at all is only a syntax error.
func (d *decoder) wrongKind(want string) error {
	kind := kindAt(d.peek())
	if err := d.skip(); err != nil {
		return err
	}
	d.problem("must be " + want + ", not " + kind)
	return nil
}

// The object and array walkers: begin consumes the opening bracket and
// reports whether the container is empty (its closing bracket consumed too);
// next consumes a ',' (more) or the closing bracket (done).

func (d *decoder) beginObject() (empty bool) {
	d.pos++ // '{'
	if d.peek() == '}' {
		d.pos++
		return true
	}
	return false
}

// key reads a member name and the ':' after it. The returned bytes may
// alias the input.
func (d *decoder) key() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.fail("expected a string for a member name")
	}
	k, err := d.stringBytes()
	if err != nil {
		return nil, err
	}
	if d.peek() != ':' {
		return nil, d.fail("expected ':' after a member name")
	}
	d.pos++
	return k, nil
}

func (d *decoder) nextMember() (more bool, err error) {
	switch d.peek() {
	case ',':
		d.pos++
		return true, nil
	case '}':
		d.pos++
		return false, nil
	}
	return false, d.fail("expected ',' or '}' after an object member")
}

func (d *decoder) beginArray() (empty bool) {
	d.pos++ // '['
	if d.peek() == ']' {
		d.pos++
		return true
	}
	return false
}

func (d *decoder) nextElement() (more bool, err error) {
	switch d.peek() {
	case ',':
		d.pos++
		return true, nil
	case ']':
		d.pos++
		return false, nil
	}
	return false, d.fail("expected ',' or ']' after an array element")
}

// document decodes the whole export into d.resources.
func (d *decoder) document() {
	var err error
	if d.peek() == '{' {
		err = d.topLevel()
	} else {
		err = d.wrongKind("an object")
	}
	if err != nil {
		return
	}
	if d.skipSpace(); !d.atEnd() {
		d.fail("unexpected data after the top-level value")
	}
}

func (d *decoder) topLevel() error {
	seen, seenRemoved := false, false
	empty := d.beginObject()
	for more := !empty; more; {
		k, err := d.key()
		if err != nil {
			return err
		}
		d.pushName(string(k))
		switch {
		case string(k) == "resources" && !seen:
			seen = true
			err = d.resourceList()
		case string(k) == "resources":
			d.problem("duplicate key")
			err = d.skip()
		case string(k) == "removed_resource_sets" && d.partial && !seenRemoved:
			seenRemoved = true
			err = d.removedSets()
		case string(k) == "removed_resource_sets" && d.partial:
			d.problem("duplicate key")
			err = d.skip()
		default:
			d.problem("unknown field")
			err = d.skip()
		}
		d.pop()
		if err != nil {
			return err
		}
		if more, err = d.nextMember(); err != nil {
			return err
		}
	}
	if !seen {
		d.probs.add(pointer("resources"), "is missing")
	}
	return nil
}

func (d *decoder) resourceList() error {
	if d.peek() != '[' {
		return d.wrongKind("an array")
	}
	if d.beginArray() {
		return nil
	}
	for i, more := 0, true; more; i++ {
		d.pushIndex(i)
		err := d.resource()
		d.pop()
		if err != nil {
			return err
		}
		if more, err = d.nextElement(); err != nil {
			return err
		}
	}
	return nil
}

// Bits for the members of a resource object, to find missing and duplicate
// ones.
const (
	hasID = 1 << iota
	hasAttributes
	hasRequires
	hasPurged
	hasSendEvent
	hasReceiveEvents
	hasReportOnly
	hasResourceSet
	hasUndefined
)

// memberNames are the members of a resource object, in bit order.
var memberNames = [...]string{"id", "attributes", "requires", "purged", "send_event", "receive_events", "report_only",
	"resource_set", "undefined"}

// resource decodes one element of "resources". It always appends to
// d.resources, with a zero ID when the id is bad, so that indexes keep
// matching the export.
func (d *decoder) resource() error {
	d.resources = append(d.resources, Resource{})
	d.keys = append(d.keys, "")
	i := len(d.resources) - 1
	if d.peek() != '{' {
		return d.wrongKind("an object")
	}
	var r Resource
	var key string
	seen := 0
	empty := d.beginObject()
	for more := !empty; more; {
		k, err := d.key()
		if err != nil {
			return err
		}
		// The constant names are pushed, so that known keys cost no
		// allocation.
		var bit int
		switch string(k) {
		case "id":
			bit = hasID
		case "attributes":
			bit = hasAttributes
		case "requires":
			bit = hasRequires
		case "purged":
			bit = hasPurged
		case "send_event":
			bit = hasSendEvent
		case "receive_events":
			bit = hasReceiveEvents
		case "report_only":
			bit = hasReportOnly
		case "resource_set":
			bit = hasResourceSet
		case "undefined":
			bit = hasUndefined
		default:
			d.pushName(string(k))
		}
		if bit != 0 {
			d.pushName(memberNames[bits.TrailingZeros(uint(bit))])
		}
		switch {
		case bit == 0:
			d.problem("unknown field")
			err = d.skip()
		case seen&bit != 0:
			d.problem("duplicate key")
			err = d.skip()
		case bit == hasID:
			r.ID, key, err = d.id()
		case bit == hasAttributes:
			r.Attributes, err = d.attributes()
		case bit == hasRequires:
			r.Requires, err = d.requires()
		case bit == hasPurged:
			r.Purged, err = d.boolean()
		case bit == hasSendEvent:
			r.SendEvent, err = d.boolean()
		case bit == hasReceiveEvents:
			r.ReceiveEvents, err = d.boolean()
		case bit == hasReportOnly:
			r.ReportOnly, err = d.boolean()
		case bit == hasResourceSet:
			r.ResourceSet, err = d.setName("leave resource_set out for the shared set")
		case bit == hasUndefined:
			r.Undefined, err = d.boolean()
		}
		seen |= bit
		d.pop()
		if err != nil {
			return err
		}
		if more, err = d.nextMember(); err != nil {
			return err
		}
	}
	if seen&hasID == 0 {
		d.probs.add(pointer("resources", i, "id"), "is missing")
	}
	if seen&hasAttributes == 0 {
		d.probs.add(pointer("resources", i, "attributes"), "is missing")
	}
	d.resources[i] = r
	d.keys[i] = key
	return nil
}

// id decodes and parses a resource's id. A bad id is reported and comes
// back as the zero ID.
func (d *decoder) id() (resource.ID, string, error) {
	if d.peek() != '"' {
		return resource.ID{}, "", d.wrongKind("a string")
	}
	s, err := d.string()
	if err != nil {
		return resource.ID{}, "", err
	}
	id, perr := resource.Parse(s)
	switch {
	case perr != nil:
		d.problem(perr.Error())
		return resource.ID{}, "", nil
	case id.Version != 0:
		d.problem(versionProblem(s))
		return resource.ID{}, "", nil
	}
	return id, s, nil
}

func (d *decoder) attributes() (map[string]any, error) {
	if d.peek() != '{' {
		return nil, d.wrongKind("an object")
	}
	m, err := d.object(0)
	return m, err
}

// requires decodes a resource's requires in export order; a bad entry is
// reported and kept as the zero ID, so that indexes keep matching.
func (d *decoder) requires() ([]resource.ID, error) {
	if d.peek() != '[' {
		return nil, d.wrongKind("an array")
	}
	if d.beginArray() {
		return nil, nil
	}
	var out []resource.ID
	for j, more := 0, true; more; j++ {
		d.pushIndex(j)
		var id resource.ID
		var err error
		if d.peek() != '"' {
			err = d.wrongKind("a string")
		} else {
			id, _, err = d.id()
		}
		d.pop()
		if err != nil {
			return nil, err
		}
		out = append(out, id)
		if more, err = d.nextElement(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setName decodes the name of a resource set: a non-empty string. Names
// are interned: a partial export of 100k resources names a few sets.
func (d *decoder) setName(emptyHint string) (string, error) {
	if d.peek() != '"' {
		return "", d.wrongKind("a string")
	}
	b, err := d.stringBytes()
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		d.problem("must not be empty: " + emptyHint)
		return "", nil
	}
	return d.name(b), nil
}

// removedSets decodes the "removed_resource_sets" of a partial export, in
// the order written, so that indexes keep matching the export.
func (d *decoder) removedSets() error {
	if d.peek() != '[' {
		return d.wrongKind("an array")
	}
	d.removed = []string{}
	if d.beginArray() {
		return nil
	}
	for j, more := 0, true; more; j++ {
		d.pushIndex(j)
		s, err := d.setName("the shared set cannot be removed")
		d.pop()
		if err != nil {
			return err
		}
		d.removed = append(d.removed, s)
		if more, err = d.nextElement(); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) boolean() (bool, error) {
	switch c := d.peek(); c {
	case 't', 'f':
		v, err := d.value(0)
		b, _ := v.(bool)
		return b, err
	}
	return false, d.wrongKind("a boolean")
}

// skip decodes and drops a value; it still has to be valid JSON.
func (d *decoder) skip() error {
	_, err := d.value(0)
	return err
}

// value decodes any JSON value: map[string]any, []any, string,
// json.Number, bool or nil.
func (d *decoder) value(depth int) (any, error) {
	switch c := d.peek(); c {
	case '{':
		return d.object(depth)
	case '[':
		return d.array(depth)
	case '"':
		return d.string()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return d.number()
	}
	if d.atEnd() {
		return nil, d.fail("unexpected end of input")
	}
	return nil, d.fail(fmt.Sprintf("unexpected character %q", d.data[d.pos]))
}

func (d *decoder) object(depth int) (map[string]any, error) {
	if depth >= maxDepth {
		return nil, d.fail(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	m := map[string]any{}
	empty := d.beginObject()
	for more := !empty; more; {
		kb, err := d.key()
		if err != nil {
			return nil, err
		}
		k := d.name(kb)
		d.pushName(k)
		_, dup := m[k]
		if dup {
			d.problem("duplicate key")
		}
		v, err := d.value(depth + 1)
		d.pop()
		if err != nil {
			return nil, err
		}
		if !dup {
			m[k] = v
		}
		if more, err = d.nextMember(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *decoder) array(depth int) ([]any, error) {
	if depth >= maxDepth {
		return nil, d.fail(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	a := []any{}
	if d.beginArray() {
		return a, nil
	}
	for i, more := 0, true; more; i++ {
		d.pushIndex(i)
		v, err := d.value(depth + 1)
		d.pop()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if more, err = d.nextElement(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (d *decoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return d.fail(fmt.Sprintf("invalid literal, expected %q", lit))
	}
	d.pos += len(lit)
	return nil
}

// number decodes a number per RFC 8259 and keeps its text.
func (d *decoder) number() (json.Number, error) {
	start := d.pos
	digits := func() bool {
		n := d.pos
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
		return d.pos > n
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case !digits():
		return "", d.fail("invalid number: expected a digit")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if !digits() {
			return "", d.fail("invalid number: expected a digit after '.'")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if !digits() {
			return "", d.fail("invalid number: expected a digit in the exponent")
		}
	}
	return json.Number(d.data[start:d.pos]), nil
}

func (d *decoder) string() (string, error) {
	b, err := d.stringBytes()
	return string(b), err
}

// stringBytes decodes a string; d.data[d.pos] is its opening quote. Without
// escapes the result aliases the input.
func (d *decoder) stringBytes() ([]byte, error) {
	d.pos++
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return d.data[start : d.pos-1], nil
		case c == '\\':
			return d.escapedString(start)
		case c < ' ':
			return nil, d.fail("control character in string")
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, d.fail("invalid UTF-8 in string")
			}
			d.pos += size
		}
	}
	return nil, d.fail("unexpected end of input in string")
}

// escapedString continues stringBytes at the first backslash.
func (d *decoder) escapedString(start int) ([]byte, error) {
	buf := make([]byte, d.pos-start, d.pos-start+16)
	copy(buf, d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return buf, nil
		case c == '\\':
			if d.pos+1 == len(d.data) {
				d.pos++
				return nil, d.fail("unexpected end of input in string")
			}
			esc := d.data[d.pos+1]
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(d.data[d.pos+2:])
				if !ok {
					return nil, d.fail(`invalid \u escape`)
				}
				if utf16.IsSurrogate(r) {
					lo, ok := rune(-1), false
					if rest := d.data[d.pos+6:]; len(rest) >= 2 && rest[0] == '\\' && rest[1] == 'u' {
						lo, ok = hex4(rest[2:])
					}
					r = utf16.DecodeRune(r, lo)
					if !ok || r == utf8.RuneError {
						return nil, d.fail(`unpaired surrogate in \u escape`)
					}
					d.pos += 6
				}
				buf = utf8.AppendRune(buf, r)
				d.pos += 4
			default:
				return nil, d.fail(fmt.Sprintf("invalid escape %q", "\\"+string(rune(esc))))
			}
			d.pos += 2
		case c < ' ':
			return nil, d.fail("control character in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, d.fail("invalid UTF-8 in string")
			}
			buf = append(buf, d.data[d.pos:d.pos+size]...)
			d.pos += size
		}
	}
	return nil, d.fail("unexpected end of input in string")
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// isJSONNumber reports whether s is a number per RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		n := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}
