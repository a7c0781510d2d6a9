package lsm

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/intendhq/intend/dictpath"
)

// Embedded entities (docs/lsm.md, "Embedded entities"): an attribute whose
// value is itself an entity (a dict) or a list of them, each attribute of
// which has its own modifier. The rules of CheckCreate and CheckUpdate
// apply at every depth:
//
//   - the embedded attribute's own modifier governs the value as a whole:
//     an r one is the model's entirely; an rw one keeps, after creation,
//     whether it is there (one entity) or which elements it has, by key,
//     and their order (a list); an rw+ one may gain and lose elements;
//   - inside, each attribute's modifier governs its value: an rw field of
//     an element that was there before may not change, an rw+ one may;
//   - an element an update adds is checked as a create (its rw fields are
//     set now, its r ones are the model's);
//   - an r field inside an embedded entity that an update leaves out is
//     fine (the model computes it again, as it does at every validation);
//     one it changes is refused.
//
// Problems inside an embedded entity name their place as a dict path
// (interfaces[name=eth0].mtu, the path an edit would use to fix it) and
// as a JSON pointer into the attributes (/interfaces/0/mtu) for the API's
// field errors; top-level problems are named as before.

// EmbeddedSpec is the entity an embedded attribute holds.
type EmbeddedSpec struct {
	// Attributes are the embedded entity's, in declaration order; each
	// may be embedded in turn.
	Attributes []AttributeSpec `json:"attributes"`
	// List: the attribute is a list of such entities, not one.
	List bool `json:"list,omitempty"`
	// Key names the attributes that identify an element of a list among
	// the others (rw, required): updates match elements by them, and
	// edits address an element with them (interfaces[name=eth0]).
	Key []string `json:"key,omitempty"`
}

// ReasonDuplicateKey: two elements of an embedded list have the same key
// (Detail names it).
const ReasonDuplicateKey AttributeReason = "duplicate_key"

// place is where a check is: the dict path and the JSON pointer (relative
// to the attributes) of a value, and whether it is inside an embedded
// entity (nested) or a top-level attribute.
type place struct {
	path   dictpath.Path
	ptr    string
	nested bool
}

func (p place) key(name string) place {
	return place{path: p.path.Key(name), ptr: p.ptr + "/" + escapeToken(name), nested: !p.path.IsRoot()}
}

// problem is a problem at p: a top-level attribute is named by its name
// (as before embedded entities), a nested one by its dict path, with its
// pointer.
func (p place) problem(name string, reason AttributeReason, mod Modifier, detail string) AttributeProblem {
	if !p.nested {
		return AttributeProblem{Attribute: name, Reason: reason, Modifier: mod, Detail: detail}
	}
	return AttributeProblem{Attribute: p.path.String(), Pointer: p.ptr, Reason: reason, Modifier: mod, Detail: detail}
}

// escapeToken escapes a JSON pointer token (RFC 6901).
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// element is one element of an embedded list.
type element struct {
	dict  map[string]any // nil when it is not a dict
	at    place
	ident string // its key, canonical; "" when it has no complete key
	dup   bool   // an earlier element has its key (reported)
}

// elements names each element of an embedded list at list: by its key
// (interfaces[name=eth0]) when it has a complete key of values a filter
// can match, by its index otherwise. Elements whose key an earlier one
// has already are reported to problems (when not nil), get no ident and
// are not checked further.
func elements(e *EmbeddedSpec, l []any, list place, problems *[]AttributeProblem) []element {
	out := make([]element, len(l))
	seen := map[string]int{}
	for i, v := range l {
		el := element{at: place{path: list.path.Index(i), ptr: list.ptr + "/" + strconv.Itoa(i), nested: true}}
		el.dict, _ = v.(map[string]any)
		if el.dict != nil && len(e.Key) > 0 {
			path, ident, ok := list.path, []string{}, true
			for _, k := range e.Key {
				kv, present := el.dict[k]
				if !present {
					ok = false
					break
				}
				if path, ok = path.Where(k, kv); !ok {
					break
				}
				ident = append(ident, keyText(kv))
			}
			if ok {
				el.ident = strings.Join(ident, "\x00")
				if first, dup := seen[el.ident]; dup {
					if problems != nil {
						*problems = append(*problems, el.at.problem("", ReasonDuplicateKey, "",
							"element "+strconv.Itoa(first)+" has the same key "+path.String()))
					}
					el.ident, el.dup = "", true
				} else {
					seen[el.ident] = i
					el.at.path = path
				}
			}
		}
		out[i] = el
	}
	return out
}

// keyText is a key value as a text that equal JSON values share (numbers
// by value, whatever their Go type), distinct across types.
func keyText(v any) string {
	if r, ok := number(v); ok {
		return "n" + r.RatString()
	}
	switch v := v.(type) {
	case string:
		return "s" + v
	case bool:
		return "b" + strconv.FormatBool(v)
	case nil:
		return "z"
	}
	return "?" // a dict or a list: Where refused it already
}

// checkCreateDict is CheckCreate of the dict attrs at p.
func checkCreateDict(specs []AttributeSpec, attrs map[string]any, p place, problems *[]AttributeProblem) {
	byName := specsByName(specs)
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		spec, ok := byName[name]
		at := p.key(name)
		switch {
		case !ok:
			*problems = append(*problems, at.problem(name, ReasonUnknown, "", ""))
		case spec.Modifier == ReadOnly:
			*problems = append(*problems, at.problem(name, ReasonReadOnly, spec.Modifier, ""))
		case spec.Embedded != nil:
			checkCreateEmbedded(spec, attrs[name], at, problems)
		}
	}
	for _, spec := range specs {
		if _, given := attrs[spec.Name]; spec.Required && spec.Modifier != ReadOnly && !given {
			*problems = append(*problems, p.key(spec.Name).problem(spec.Name, ReasonMissing, spec.Modifier, ""))
		}
	}
}

// checkCreateEmbedded checks an embedded attribute's value v at p as a
// create. A value of the wrong shape is the model's to refuse.
func checkCreateEmbedded(spec AttributeSpec, v any, p place, problems *[]AttributeProblem) {
	e := spec.Embedded
	if !e.List {
		if m, ok := v.(map[string]any); ok {
			checkCreateDict(e.Attributes, m, p, problems)
		}
		return
	}
	l, ok := v.([]any)
	if !ok {
		return
	}
	for _, el := range elements(e, l, p, problems) {
		if el.dict != nil && !el.dup {
			checkCreateDict(e.Attributes, el.dict, el.at, problems)
		}
	}
}

// checkUpdateDict is CheckUpdate of the dict current, turned into next,
// at p.
func checkUpdateDict(specs []AttributeSpec, current, next map[string]any, p place, problems *[]AttributeProblem) {
	byName := specsByName(specs)
	names := slices.Collect(maps.Keys(current))
	for name := range next {
		if _, ok := current[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		cur, inCur := current[name]
		nxt, inNext := next[name]
		if inCur == inNext && (!inCur || sameJSON(cur, nxt)) {
			continue
		}
		spec, ok := byName[name]
		at := p.key(name)
		switch {
		case !ok:
			*problems = append(*problems, at.problem(name, ReasonUnknown, "", ""))
		case spec.Modifier == ReadOnly:
			if at.nested && !inNext {
				continue // the model computes it again
			}
			*problems = append(*problems, at.problem(name, ReasonReadOnly, spec.Modifier, ""))
		case spec.Embedded != nil && inCur && inNext && checkUpdateEmbedded(name, spec, cur, nxt, at, problems):
		case spec.Modifier != ReadWriteAlways:
			*problems = append(*problems, at.problem(name, ReasonNotUpdatable, spec.Modifier, ""))
		case !inNext && spec.Required:
			*problems = append(*problems, at.problem(name, ReasonMissing, spec.Modifier, ""))
		case !inCur && spec.Embedded != nil:
			checkCreateEmbedded(spec, nxt, at, problems) // added now: its contents are a create's
		}
	}
}

// checkUpdateEmbedded checks the change of an embedded attribute (rw or
// rw+) from cur to next at p, element by element. It returns false, and
// checks nothing, when either value is not of the embedded shape (a dict,
// or a list): then the change is one of the value as a whole.
func checkUpdateEmbedded(name string, spec AttributeSpec, cur, next any, p place, problems *[]AttributeProblem) bool {
	e := spec.Embedded
	if !e.List {
		c, ok1 := cur.(map[string]any)
		n, ok2 := next.(map[string]any)
		if !ok1 || !ok2 {
			return false
		}
		checkUpdateDict(e.Attributes, c, n, p, problems)
		return true
	}
	c, ok1 := cur.([]any)
	n, ok2 := next.([]any)
	if !ok1 || !ok2 {
		return false
	}
	curEls := elements(e, c, p, nil)
	byIdent := map[string]int{}
	for i, el := range curEls {
		if el.ident != "" {
			byIdent[el.ident] = i
		}
	}
	matched := make([]bool, len(curEls))
	var added, removed []string
	order := true // the matched elements keep their order
	last := -1
	for _, el := range elements(e, n, p, problems) {
		i, ok := byIdent[el.ident]
		if el.ident == "" || !ok || matched[i] {
			added = append(added, el.at.path.String())
			if spec.Modifier == ReadWriteAlways && el.dict != nil && !el.dup {
				checkCreateDict(e.Attributes, el.dict, el.at, problems)
			}
			continue
		}
		matched[i] = true
		order = order && i > last
		last = i
		checkUpdateDict(e.Attributes, curEls[i].dict, el.dict, el.at, problems)
	}
	for i, el := range curEls {
		if !matched[i] {
			removed = append(removed, el.at.path.String())
		}
	}
	if spec.Modifier == ReadWriteAlways {
		return true
	}
	var what []string
	if len(added) > 0 {
		what = append(what, "adds "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		what = append(what, "removes "+strings.Join(removed, ", "))
	}
	if len(what) == 0 && !order {
		what = append(what, "reorders its elements")
	}
	if len(what) > 0 {
		*problems = append(*problems, p.problem(name, ReasonNotUpdatable, spec.Modifier, strings.Join(what, "; ")))
	}
	return true
}

// embeddedDefaults is v with the defaults of the embedded entity e
// written into it (into each element of a list); v is not changed.
// WithEmbeddedDefaults is attrs with the defaults of the embedded
// entities' fields written into each element that lacks them: an
// update that adds an element gets them in its candidate set, as a
// create does (WithDefaults). Top-level attributes are left as they
// are; attrs itself is returned when the entity has no embedded ones.
func WithEmbeddedDefaults(specs []AttributeSpec, attrs map[string]any) map[string]any {
	var out map[string]any
	for _, spec := range specs {
		v, ok := attrs[spec.Name]
		if spec.Embedded == nil || !ok || spec.Modifier == ReadOnly {
			continue
		}
		if out == nil {
			out = maps.Clone(attrs)
		}
		out[spec.Name] = embeddedDefaults(spec.Embedded, v)
	}
	if out == nil {
		return attrs
	}
	return out
}

func embeddedDefaults(e *EmbeddedSpec, v any) any {
	if !e.List {
		if m, ok := v.(map[string]any); ok {
			return WithDefaults(e.Attributes, m)
		}
		return v
	}
	l, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(l))
	for i, el := range l {
		if m, ok := el.(map[string]any); ok {
			out[i] = WithDefaults(e.Attributes, m)
		} else {
			out[i] = el
		}
	}
	return out
}

// withoutReadOnly is attrs without the r attributes of specs at any
// depth; changed is false, and attrs itself returned, when it holds none.
func withoutReadOnly(specs []AttributeSpec, attrs map[string]any) (out map[string]any, changed bool) {
	for _, spec := range specs {
		v, ok := attrs[spec.Name]
		if !ok {
			continue
		}
		var nv any
		drop := spec.Modifier == ReadOnly && !spec.Allocated()
		if !drop && spec.Embedded != nil {
			var c bool
			if nv, c = embeddedWithoutReadOnly(spec.Embedded, v); !c {
				continue
			}
		} else if !drop {
			continue
		}
		if out == nil {
			out = maps.Clone(attrs)
		}
		if drop {
			delete(out, spec.Name)
		} else {
			out[spec.Name] = nv
		}
	}
	if out == nil {
		return attrs, false
	}
	return out, true
}

func embeddedWithoutReadOnly(e *EmbeddedSpec, v any) (any, bool) {
	if !e.List {
		if m, ok := v.(map[string]any); ok {
			return withoutReadOnly(e.Attributes, m)
		}
		return v, false
	}
	l, ok := v.([]any)
	if !ok {
		return v, false
	}
	var out []any
	for i, el := range l {
		m, ok := el.(map[string]any)
		if !ok {
			continue
		}
		nm, c := withoutReadOnly(e.Attributes, m)
		if !c {
			continue
		}
		if out == nil {
			out = slices.Clone(l)
		}
		out[i] = nm
	}
	if out == nil {
		return v, false
	}
	return out, true
}

// hasReadOnly reports whether the embedded entity e has an r attribute
// at some depth.
func hasReadOnly(e *EmbeddedSpec) bool {
	for _, a := range e.Attributes {
		if a.Modifier == ReadOnly || a.Embedded != nil && hasReadOnly(a.Embedded) {
			return true
		}
	}
	return false
}
