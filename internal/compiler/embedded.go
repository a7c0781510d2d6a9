package compiler

import (
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/intendhq/intend/internal/lsm"
)

// Embedded entities (docs/lsm.md, "Embedded entities"): a parameter field
// whose value is a struct, or a list of structs, some field of which
// carries an @lsm modifier, is an embedded entity; its fields are
// attributes with their own modifiers, extracted as the parameter's are.
// A list of them names the fields that identify an element:
//
//	interfaces: [...#Interface] @lsm(rw+, key=name)
//
// A struct without @lsm fields stays a plain value (a dict attribute), as
// before embedded entities.

// maxEmbeddedDepth bounds how deep embedded entities nest: a definition
// may hold itself through an optional field, which CUE allows.
const maxEmbeddedDepth = 8

// embedded extracts the embedded entity f holds, if it holds one (nil
// otherwise); keys are the key= options of its @lsm attribute. ok is
// false when it has errors (reported).
func (c *compilation) embedded(fpath string, f cue.Value, keys []string, depth int) (e *lsm.EmbeddedSpec, ok bool) {
	elem, list := f, false
	if f.IncompleteKind() == cue.ListKind {
		elem, list = f.LookupPath(cue.MakePath(cue.AnyIndex)), true
	}
	if !elem.Exists() || elem.IncompleteKind() != cue.StructKind || !hasModifiers(elem) {
		if len(keys) > 0 {
			c.errs.addf("", fpath, attributePos(f), "key=%s: only a list of embedded entities has a key (a list of structs whose fields carry @lsm modifiers)", keys[0])
			return nil, false
		}
		return nil, true
	}
	if depth >= maxEmbeddedDepth {
		c.errs.addf("", fpath, attributePos(f), "embedded entities nest more than %d deep", maxEmbeddedDepth)
		return nil, false
	}
	e = &lsm.EmbeddedSpec{List: list, Key: keys, Attributes: []lsm.AttributeSpec{}}
	at := fpath
	if list {
		at += "[_]"
	}
	ok = true
	it, err := elem.Fields(cue.Optional(true))
	if err != nil {
		c.errs.addCUE("", err)
		return e, false
	}
	for it.Next() {
		spec, good := c.attribute(at, it.Selector(), it.Value(), depth+1)
		if spec.References != "" {
			c.errs.addf("", at+"."+cue.MakePath(it.Selector()).String(), attributePos(it.Value()),
				"ref=%s: a reference is a top-level attribute, not one inside an embedded entity", spec.References)
			good = false
		}
		if spec.Allocate != "" {
			c.errs.addf("", at+"."+cue.MakePath(it.Selector()).String(), attributePos(it.Value()),
				"allocate=%s: an allocated attribute is a top-level attribute, not one inside an embedded entity", spec.Allocate)
			good = false
		}
		e.Attributes = append(e.Attributes, spec)
		ok = ok && good
	}
	switch {
	case !list && len(keys) > 0:
		c.errs.addf("", fpath, attributePos(f), "key=%s: only a list of embedded entities has a key; this is one embedded entity", keys[0])
		ok = false
	case list && len(keys) == 0:
		c.errs.addf("", fpath, attributePos(f), "a list of embedded entities needs its key: @lsm(<modifier>, key=<attribute>), repeated for a key of several attributes (updates match elements by it, and edits address them with it: %s[name=eth0])", lastSegment(fpath))
		ok = false
	}
	for i, k := range keys {
		j := slices.IndexFunc(e.Attributes, func(a lsm.AttributeSpec) bool { return a.Name == k })
		switch {
		case slices.Contains(keys[:i], k):
			c.errs.addf("", fpath, attributePos(f), "key=%s is given twice", k)
			ok = false
		case j < 0:
			c.errs.addf("", fpath, attributePos(f), "key=%s names no attribute of the embedded entity", k)
			ok = false
		case e.Attributes[j].Modifier != lsm.ReadWrite || !e.Attributes[j].Required || e.Attributes[j].Embedded != nil:
			c.errs.addf("", fpath, attributePos(f), "key=%s: a key identifies its element, so it is a required rw attribute of it (not r, not rw+, no default, not optional, not embedded)", k)
			ok = false
		}
	}
	return e, ok
}

// hasModifiers reports whether a field of the struct v carries an @lsm
// attribute.
func hasModifiers(v cue.Value) bool {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return false
	}
	for it.Next() {
		for _, a := range it.Value().Attributes(cue.FieldAttr) {
			if a.Name() == "lsm" {
				return true
			}
		}
	}
	return false
}

// lastSegment is the last '.'-separated segment of a CUE path.
func lastSegment(path string) string {
	return path[strings.LastIndexByte(path, '.')+1:]
}
