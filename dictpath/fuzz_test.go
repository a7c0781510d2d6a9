package dictpath

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// seedPaths are paths for every fuzz target: valid and invalid, exact and
// wild.
var seedPaths = []string{
	"", ".", "a", "a.b.c", `a\.b`, `\0`, `a.\0.b`, `\\0`, `\[\]\=\,\*\\`,
	"items[name=x].size", "items[name=x,id=1]", "items[0]", "items[1].a", "items[0=1]",
	"items[k=]", `items[k=\0]`, `items[\0=v]`, `items[k=\*]`, "hosts[ip=10.0.0.1]", `a[k.x=x[1\]]`,
	"l[k=1]", "l[k=1].k", "l[k=1e0]", "l[k=true]", "d[k=1].x",
	"*", "*.a", "a[*]", "a[*].b", "a[k=*]", "*[k=*,j=1]", "*[0]",
	".a", "a.", "a..b", "a[", "a[k", "a[k=v", "a[k=1,k=2]", "a]", `a\`, `a\q`, `a\0`, "a[01]",
	"a[k=v]b", "a[0][1]", "a\xff", "*a", "a[*,k=v]", "a[k=*x]",
}

// seedDocs are documents for the edit targets.
var seedDocs = []string{
	`{}`, `null`, `[]`, `"s"`, `1`,
	`{"a": {"b": {"c": 1}}, "s": "str", "n": null}`,
	`{"items": [{"name": "x", "size": 1}, {"name": "y", "id": 1}, "loose"], "l": [{"k": 1}, {"k": "1"}]}`,
	`{"l": [{"k": 1}, {"k": true}, {"k": null}], "d": {"k": 1}}`,
	`{"a.b": {"": 1}, "": {"": 2}, "hosts": [{"ip": "10.0.0.1"}]}`,
	`{"items": [[1], {"0": 1}], "a": [{"k.x": "x[1]"}]}`,
	`{"ports": [{"port": 80, "proto": "tcp"}, {"port": "80"}, {"port": 8e1, "x": {}}]}`,
	`{"a": [{"b": [{"c": 1}, {"c": null}]}, {"b": {"c": 1}}], "j": [{"k": true, "j": "1"}]}`,
}

// Inputs longer than these are skipped. Longer ones find nothing shorter
// ones do not (a path of 96 bytes has a dozen elements), and the fuzzer
// minimizes every new interesting input in time quadratic in its length,
// without counting executions meanwhile: long inputs made the targets stall
// for most of a 10 s run.
const (
	maxPath  = 96
	maxDoc   = 160
	maxValue = 64
)

func decodeFuzz(b []byte, useNumber bool) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func FuzzParse(f *testing.F) {
	for _, s := range seedPaths {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxPath {
			return
		}
		p, perr := Parse(s)
		w, werr := ParseWild(s)
		for _, err := range []error{perr, werr} {
			var se *SyntaxError
			if err != nil && (!errors.As(err, &se) || se.Input != s || se.Offset < 0 || se.Offset > len(s) || se.Msg == "") {
				t.Fatalf("parse %q: error %#v", s, err)
			}
		}
		if werr != nil {
			if perr == nil {
				t.Fatalf("Parse(%q) succeeds where ParseWild fails: %v", s, werr)
			}
			return
		}
		e, exact := w.Exact()
		if exact != (perr == nil) {
			t.Fatalf("ParseWild(%q).Exact() = %v, but Parse error %v", s, exact, perr)
		}
		if exact && !e.Equal(p) {
			t.Fatalf("Parse(%q) = %v, ParseWild = %v", s, p, w)
		}
		ws := w.String()
		w2, err := ParseWild(ws)
		if err != nil {
			t.Fatalf("ParseWild(%q) fails on the canonical form of %q: %v", ws, s, err)
		}
		if !w2.Equal(w) || !reflect.DeepEqual(w2.elems, w.elems) {
			t.Fatalf("ParseWild(%q) = %#v, want %#v (from %q)", ws, w2.elems, w.elems, s)
		}
		if w2.String() != ws {
			t.Fatalf("the canonical form %q is not a fixed point: %q", ws, w2.String())
		}
		if !exact {
			return
		}
		ps := p.String()
		if ps != ws {
			t.Fatalf("Parse(%q).String() = %q, ParseWild gives %q", s, ps, ws)
		}
		p2, err := Parse(ps)
		if err != nil || !p2.Equal(p) || p2.String() != ps {
			t.Fatalf("Parse(%q) = %v, %v; want %v", ps, p2, err, p)
		}
	})
}

// renames reports whether p ends in a member that a filter of the element
// before it names (items[name=x].name): editing it may leave p selecting
// nothing.
func renames(p Path) bool {
	n := len(p.elems)
	if n < 2 || p.elems[n-1].sel != selNone {
		return false
	}
	for _, f := range p.elems[n-2].filters {
		if f.key == p.elems[n-1].key {
			return true
		}
	}
	return false
}

// checkPathError fails t unless err is a *PathError for op and p.
func checkPathError(t *testing.T, err error, op string, p Path) {
	t.Helper()
	var pe *PathError
	if !errors.As(err, &pe) || pe.Op != op || !pe.Path.Equal(p) || pe.At.Len() > p.Len() || pe.Msg == "" {
		t.Fatalf("%s %v: error %#v", op, p, err)
	}
	for _, kind := range []error{ErrType, ErrAmbiguous, ErrIndex, ErrValue, ErrRoot} {
		if errors.Is(err, kind) {
			return
		}
	}
	t.Fatalf("%s %v: error %v wraps no known kind", op, p, err)
}

// scribble modifies every dict and list inside v in place.
func scribble(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			scribble(x)
		}
		v["\x00scribbled"] = true
	case []any:
		for i, x := range v {
			scribble(x)
			v[i] = "scribbled"
		}
	}
}

// checkUnchanged fails t when doc differs from a fresh decoding of src,
// before or after scribbling over out.
func checkUnchanged(t *testing.T, doc, out any, src []byte, useNumber bool) {
	t.Helper()
	ref, _ := decodeFuzz(src, useNumber)
	if !reflect.DeepEqual(doc, ref) {
		t.Fatalf("the input was modified: %#v, want %#v", doc, ref)
	}
	scribble(out)
	if !reflect.DeepEqual(doc, ref) {
		t.Fatal("the result shares a dict or list with the input")
	}
}

// docsFor returns the documents to run a fuzzed path against: the fuzzed
// one and every seed document. Fuzzed paths and documents rarely share
// keys, while the seed paths, which mutations start from, do share keys
// with the seed documents.
func docsFor(docJSON string) []string {
	return append([]string{docJSON}, seedDocs...)
}

func FuzzReplaceGet(f *testing.F) {
	for i, p := range seedPaths {
		f.Add(p, seedDocs[i%len(seedDocs)], `{"k": "1", "x": [1, null]}`, i%2 == 0)
		f.Add(p, seedDocs[(i+3)%len(seedDocs)], `1.5`, i%2 == 1)
	}
	f.Add("items[name=x]", seedDocs[6], `{"name": "x"}`, true)
	f.Add("items[name=x].name", seedDocs[6], `"y"`, false)
	f.Add("l[k=1]", seedDocs[7], `{"k": 1e0}`, true)
	f.Fuzz(func(t *testing.T, path string, docJSON, valueJSON string, useNumber bool) {
		if len(path) > maxPath || len(docJSON) > maxDoc || len(valueJSON) > maxValue {
			return
		}
		p, err := Parse(path)
		if err != nil {
			return
		}
		if _, ok := decodeFuzz([]byte(valueJSON), useNumber); !ok {
			return
		}
		for _, src := range docsFor(docJSON) {
			checkReplace(t, p, src, valueJSON, useNumber)
			checkMerge(t, p, src, valueJSON, useNumber)
		}
	})
}

// checkReplace checks that after Replace, Get finds the value.
func checkReplace(t *testing.T, p Path, src, valueJSON string, useNumber bool) {
	doc, ok := decodeFuzz([]byte(src), useNumber)
	if !ok {
		return
	}
	value, _ := decodeFuzz([]byte(valueJSON), useNumber)
	out, err := Replace(doc, p, value)
	if err != nil {
		checkPathError(t, err, "replace", p)
		checkUnchanged(t, doc, nil, []byte(src), useNumber)
		return
	}
	got, ok := Get(out, p)
	switch {
	case ok && !reflect.DeepEqual(got, value):
		t.Fatalf("Replace(%s, %s, %s): Get = %#v, want %#v", src, p, valueJSON, got, value)
	case !ok && !renames(p):
		t.Fatalf("Replace(%s, %s, %s) = %#v: Get finds nothing", src, p, valueJSON, out)
	}
	checkUnchanged(t, doc, out, []byte(src), useNumber)
}

// checkMerge checks that after Merge, Get finds a dict with the patch's
// members.
func checkMerge(t *testing.T, p Path, src, patchJSON string, useNumber bool) {
	doc, ok := decodeFuzz([]byte(src), useNumber)
	if !ok {
		return
	}
	value, _ := decodeFuzz([]byte(patchJSON), useNumber)
	patch, isDict := value.(map[string]any)
	out, err := Merge(doc, p, value)
	if err != nil {
		checkPathError(t, err, "merge", p)
		checkUnchanged(t, doc, nil, []byte(src), useNumber)
		if !isDict && !errors.Is(err, ErrValue) {
			t.Fatalf("Merge of a %T: %v, want ErrValue", value, err)
		}
		return
	}
	if !isDict {
		t.Fatalf("Merge accepted a %T patch", value)
	}
	got, ok := Get(out, p)
	if !ok {
		// A patch can rename the element a filter selects.
		if n := p.Len(); n > 0 && p.elems[n-1].sel == selFilter || renames(p) {
			checkUnchanged(t, doc, out, []byte(src), useNumber)
			return
		}
		t.Fatalf("Merge(%s, %s, %s) = %#v: Get finds nothing", src, p, patchJSON, out)
	}
	m, ok := got.(map[string]any)
	if !ok {
		t.Fatalf("Merge(%s, %s, %s): Get = %#v, want a dict", src, p, patchJSON, got)
	}
	for k, v := range patch {
		if _, sub := v.(map[string]any); sub {
			continue
		}
		if mv, has := m[k]; v == nil && has || v != nil && !reflect.DeepEqual(mv, v) {
			t.Fatalf("Merge(%s, %s, %s): member %q = %#v, want %#v", src, p, patchJSON, k, mv, v)
		}
	}
	checkUnchanged(t, doc, out, []byte(src), useNumber)
}

func FuzzRemove(f *testing.F) {
	for i, p := range seedPaths {
		for j := range 2 {
			f.Add(p, seedDocs[(i+j*5)%len(seedDocs)], (i+j)%2 == 0)
		}
	}
	f.Fuzz(func(t *testing.T, path string, docJSON string, useNumber bool) {
		if len(path) > maxPath || len(docJSON) > maxDoc {
			return
		}
		p, err := Parse(path)
		if err != nil {
			return
		}
		for _, src := range docsFor(docJSON) {
			checkRemove(t, p, src, useNumber)
		}
	})
}

// checkRemove checks that after Remove, Get finds nothing, and that Remove
// is idempotent, but for an index.
func checkRemove(t *testing.T, p Path, src string, useNumber bool) {
	doc, ok := decodeFuzz([]byte(src), useNumber)
	if !ok {
		return
	}
	out, err := Remove(doc, p)
	if err != nil {
		checkPathError(t, err, "remove", p)
		checkUnchanged(t, doc, nil, []byte(src), useNumber)
		return
	}
	if n := p.Len(); p.elems[n-1].sel == selIndex {
		// The elements after a removed one move up: the list is one
		// shorter, or unchanged when the index was past its end.
		list := p.prefix(n-1, true)
		before, _ := Get(doc, list)
		after, _ := Get(out, list)
		b, _ := before.([]any)
		a, _ := after.([]any)
		want := len(b)
		if p.elems[n-1].index < len(b) {
			want--
		}
		if len(a) != want {
			t.Fatalf("Remove(%s, %s): %d elements left of %d", src, p, len(a), len(b))
		}
	} else {
		if got, ok := Get(out, p); ok {
			t.Fatalf("Remove(%s, %s) = %#v: Get still finds %#v", src, p, out, got)
		}
		again, err := Remove(out, p)
		if err != nil || !reflect.DeepEqual(again, out) {
			t.Fatalf("Remove(%s, %s) is not idempotent: %#v, %v; want %#v", src, p, again, err, out)
		}
	}
	checkUnchanged(t, doc, out, []byte(src), useNumber)
}

func FuzzFind(f *testing.F) {
	for i, p := range seedPaths {
		f.Add(p, seedDocs[i%len(seedDocs)], i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, path string, docJSON string, useNumber bool) {
		if len(path) > maxPath || len(docJSON) > maxDoc {
			return
		}
		w, err := ParseWild(path)
		if err != nil {
			return
		}
		for _, src := range docsFor(docJSON) {
			checkFind(t, w, src, useNumber)
		}
	})
}

// checkFind checks that every match's concrete path is exact, parses back
// and selects the match with Get, and that Find agrees with Get on an exact
// path.
func checkFind(t *testing.T, w WildPath, src string, useNumber bool) {
	doc, ok := decodeFuzz([]byte(src), useNumber)
	if !ok {
		return
	}
	matches := Find(doc, w)
	seen := map[string]bool{}
	for _, m := range matches {
		s := m.Path.String()
		if seen[s] {
			t.Fatalf("Find(%s, %s) returns %s twice", src, w, s)
		}
		seen[s] = true
		q, err := Parse(s)
		if err != nil || !q.Equal(m.Path) {
			t.Fatalf("Find(%s, %s): the concrete path %s does not parse back: %v", src, w, s, err)
		}
		if v, ok := Get(doc, m.Path); !ok || !reflect.DeepEqual(v, m.Value) {
			t.Fatalf("Find(%s, %s): Get(%s) = %#v, %v; want %#v", src, w, s, v, ok, m.Value)
		}
		if m.Path.Len() != len(w.elems) {
			t.Fatalf("Find(%s, %s): the concrete path %s has another length", src, w, s)
		}
	}
	if p, exact := w.Exact(); exact {
		if v, ok := Get(doc, p); ok && (len(matches) != 1 || !reflect.DeepEqual(matches[0].Value, v)) {
			t.Fatalf("Find(%s, %s) = %v, but Get finds %#v", src, w, matches, v)
		}
	}
	checkUnchanged(t, doc, nil, []byte(src), useNumber)
}
