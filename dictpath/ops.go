package dictpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Errors that a *PathError wraps, for errors.Is.
var (
	// ErrType: a value on the way has the wrong type to step into (a key
	// into anything but a dict, a selector into anything but a list), or the
	// target of a Merge is not a dict.
	ErrType = errors.New("wrong type")
	// ErrAmbiguous: a filter matches more than one element.
	ErrAmbiguous = errors.New("ambiguous filter")
	// ErrIndex: Replace or Merge through an index past the end of a list.
	ErrIndex = errors.New("index out of range")
	// ErrValue: the value of the edit is not acceptable (a Merge patch that
	// is not a dict, or a Replace of a filtered element by a value the
	// filter does not match).
	ErrValue = errors.New("invalid value")
	// ErrRoot: Remove of the root.
	ErrRoot = errors.New("root")
)

// PathError is an edit that cannot be applied.
type PathError struct {
	// Op is "replace", "merge" or "remove".
	Op string
	// Path is the path of the edit.
	Path Path
	// At is the prefix of Path where the edit failed: the value that has
	// the wrong type, the list a filter or index selects in, or Path itself
	// when the value of the edit is at fault.
	At Path
	// Err is ErrType, ErrAmbiguous, ErrIndex, ErrValue or ErrRoot.
	Err error
	// Msg says what was found, e.g. "found a string, want a dict".
	Msg string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("dictpath: %s %s: at %s: %s", e.Op, e.Path, e.At, e.Msg)
}

func (e *PathError) Unwrap() error { return e.Err }

// Match is one value found by Find.
type Match struct {
	// Path is the exact path of Value, with list elements named by index.
	Path Path
	// Value is the value in the document; do not modify it.
	Value any
}

// Get returns the value at p in doc. It reports false when there is none:
// a member is absent, a value on the way has the wrong type, an index is
// out of range, or a filter matches no element or more than one. The value
// is the one inside doc, not a copy.
func Get(doc any, p Path) (any, bool) {
	cur := doc
	for _, e := range p.elems {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[e.key]; !ok {
			return nil, false
		}
		if e.sel == selNone {
			continue
		}
		l, ok := cur.([]any)
		if !ok {
			return nil, false
		}
		i := -1
		switch e.sel {
		case selIndex:
			i = e.index
		case selFilter:
			i, ok = unique(l, e.filters)
			if !ok {
				return nil, false
			}
		}
		if i < 0 || i >= len(l) {
			return nil, false
		}
		cur = l[i]
	}
	return cur, true
}

// Find returns every value that w matches in doc, in document order (dict
// members sorted by key, list elements by index), each with its exact path.
// The values are the ones inside doc, not copies.
func Find(doc any, w WildPath) []Match {
	var out []Match
	find(doc, w.elems, nil, &out)
	return out
}

func find(cur any, rest, prefix []element, out *[]Match) {
	if len(rest) == 0 {
		*out = append(*out, Match{Path: Path{slices.Clone(prefix)}, Value: cur})
		return
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return
	}
	e := rest[0]
	var keys []string
	if e.anyKey {
		keys = slices.Sorted(maps.Keys(m))
	} else if _, ok := m[e.key]; ok {
		keys = []string{e.key}
	}
	for _, k := range keys {
		v := m[k]
		if e.sel == selNone {
			find(v, rest[1:], append(prefix, element{key: k}), out)
			continue
		}
		l, ok := v.([]any)
		if !ok {
			continue
		}
		for i, x := range l {
			if (e.sel == selIndex && i != e.index) || (e.sel == selFilter && !matches(x, e.filters)) {
				continue
			}
			find(x, rest[1:], append(prefix, element{key: k, sel: selIndex, index: i}), out)
		}
	}
}

// unique returns the index of the one element of l that the filters match;
// ok is false when several match, and the index is -1 when none does.
func unique(l []any, filters []filter) (i int, ok bool) {
	i = -1
	for j, x := range l {
		if matches(x, filters) {
			if i >= 0 {
				return -1, false
			}
			i = j
		}
	}
	return i, true
}

// Replace returns a copy of doc with the value at p set to value (copied).
// What is missing on the way is created (see the package documentation).
// When the last element of p selects by filter, value must be a dict that
// the filter matches, so that p still selects it; a path that goes on to a
// member the filter names (items[name=x].name) renames the element, after
// which p selects nothing. The error is a *PathError.
func Replace(doc any, p Path, value any) (any, error) {
	return (&editor{op: "replace", path: p, value: value}).apply(doc)
}

// Merge returns a copy of doc with patch, a dict, merged into the dict at p
// as RFC 7386 JSON Merge Patch does. When the value at p is absent it is
// created (an element created by a filter starts with the filter's
// members); when it is present it must be a dict. The error is a
// *PathError.
func Merge(doc any, p Path, patch any) (any, error) {
	return (&editor{op: "merge", path: p, value: patch}).apply(doc)
}

// Remove returns a copy of doc without the dict member or list element at
// p. Nothing there is not an error, but a value of the wrong type on the
// way, an ambiguous filter or the root is. The error is a *PathError.
func Remove(doc any, p Path) (any, error) {
	return (&editor{op: "remove", path: p}).apply(doc)
}

// editor applies one edit to a copy of a document, in place.
type editor struct {
	op    string // "replace", "merge" or "remove"
	path  Path
	value any
}

func (ed *editor) apply(doc any) (any, error) {
	switch ed.op {
	case "merge":
		if _, ok := ed.value.(map[string]any); !ok {
			return nil, ed.fail(ErrValue, ed.path, "the merge patch is %s, not a dict", describe(ed.value))
		}
	case "remove":
		if ed.path.IsRoot() {
			return nil, ed.fail(ErrRoot, ed.path, "cannot remove the root")
		}
	}
	out, _, err := ed.edit(clone(doc), true, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (ed *editor) fail(kind error, at Path, format string, args ...any) error {
	return &PathError{Op: ed.op, Path: ed.path, At: at, Err: kind, Msg: fmt.Sprintf(format, args...)}
}

// edit applies the edit from element i on to cur, the value at the first i
// elements of the path (present false when there is none), and returns its
// new value (keep false when it is to be deleted). cur belongs to the
// editor's copy and is modified in place.
func (ed *editor) edit(cur any, present bool, i int) (any, bool, error) {
	if i == len(ed.path.elems) {
		return ed.leaf(cur, present)
	}
	e := ed.path.elems[i]
	m, ok := cur.(map[string]any)
	switch {
	case ok:
	case !present && ed.op == "remove":
		return nil, false, nil
	case !present:
	default:
		return nil, false, ed.fail(ErrType, ed.path.prefix(i, false), "found %s, want a dict", describe(cur))
	}
	if m == nil {
		m = map[string]any{}
	}
	child, has := m[e.key]
	var v any
	var keep bool
	var err error
	if e.sel == selNone {
		v, keep, err = ed.edit(child, has, i+1)
	} else {
		v, keep, err = ed.list(child, has, i)
	}
	if err != nil {
		return nil, false, err
	}
	if keep {
		m[e.key] = v
	} else {
		delete(m, e.key)
	}
	return m, true, nil
}

// list applies the edit to cur, the value at the key of element i, in
// which the selector of element i selects.
func (ed *editor) list(cur any, present bool, i int) (any, bool, error) {
	e := ed.path.elems[i]
	l, ok := cur.([]any)
	switch {
	case ok:
	case !present && ed.op == "remove":
		return nil, false, nil
	case !present:
	default:
		return nil, false, ed.fail(ErrType, ed.path.prefix(i, true), "found %s, want a list", describe(cur))
	}
	last := i+1 == len(ed.path.elems)
	j := e.index
	if e.sel == selFilter {
		var ok bool
		if j, ok = unique(l, e.filters); !ok {
			return nil, false, ed.fail(ErrAmbiguous, ed.path.prefix(i, true), "filter %s matches more than one element", filterText(e))
		}
	}
	if j < 0 || j >= len(l) {
		if ed.op == "remove" {
			return l, true, nil
		}
		if e.sel == selIndex {
			return nil, false, ed.fail(ErrIndex, ed.path.prefix(i, true), "index %d is out of range for a list of %d", e.index, len(l))
		}
		v, _, err := ed.edit(newElement(e.filters), true, i+1)
		if err != nil {
			return nil, false, err
		}
		if err := ed.checkReplaced(e, last, v); err != nil {
			return nil, false, err
		}
		return append(l, v), true, nil
	}
	v, keep, err := ed.edit(l[j], true, i+1)
	if err != nil {
		return nil, false, err
	}
	if e.sel == selFilter {
		if err := ed.checkReplaced(e, last, v); err != nil {
			return nil, false, err
		}
	}
	if keep {
		l[j] = v
	} else {
		l = slices.Delete(l, j, j+1)
	}
	return l, true, nil
}

// checkReplaced refuses a Replace of the element a filter selects by one
// the filter does not match, which would leave the path selecting nothing.
func (ed *editor) checkReplaced(e element, last bool, v any) error {
	if ed.op != "replace" || !last || matches(v, e.filters) {
		return nil
	}
	return ed.fail(ErrValue, ed.path, "filter %s does not match the value (%s): it must be a dict holding the filter's members", filterText(e), describe(v))
}

// leaf applies the edit to the value at the whole path.
func (ed *editor) leaf(cur any, present bool) (any, bool, error) {
	switch ed.op {
	case "replace":
		return clone(ed.value), true, nil
	case "merge":
		m, ok := cur.(map[string]any)
		if !ok && present {
			return nil, false, ed.fail(ErrType, ed.path, "found %s, want a dict to merge into", describe(cur))
		}
		return mergePatch(m, ed.value.(map[string]any)), true, nil
	}
	return nil, false, nil
}

// mergePatch merges patch into t (RFC 7386), modifying t, and returns it.
func mergePatch(t, patch map[string]any) map[string]any {
	if t == nil {
		t = make(map[string]any, len(patch))
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(t, k)
		case map[string]any:
			tv, _ := t[k].(map[string]any)
			t[k] = mergePatch(tv, pv)
		default:
			t[k] = clone(v)
		}
	}
	return t
}

// newElement is the list element a filter creates: its members, as strings
// or null.
func newElement(filters []filter) map[string]any {
	m := make(map[string]any, len(filters))
	for _, f := range filters {
		if f.kind == valNull {
			m[f.key] = nil
		} else {
			m[f.key] = f.text
		}
	}
	return m
}

// clone copies the dicts and lists of v, keeping nil ones nil.
func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = clone(x)
		}
		return m
	case []any:
		if v == nil {
			return v
		}
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = clone(x)
		}
		return l
	}
	return v
}

func filterText(e element) string {
	var b strings.Builder
	writeSelector(&b, element{sel: selFilter, filters: e.filters})
	return b.String()
}

// describe names the JSON type of v with an article, for error messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case float64, json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a dict"
	}
	return fmt.Sprintf("a %T", v)
}
