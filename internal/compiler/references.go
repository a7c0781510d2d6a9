package compiler

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"

	"github.com/intendhq/intend/internal/lsm"
)

// Relations between service instances (issue 14, B.6): an attribute
// declared @lsm(rw, ref=site) names an instance of the entity site (a
// string: its id or identity) or several (a list of strings). When a
// compile evaluates an instance with such attributes, the caller gives
// (Options.Related) the referenced instances' active attributes, filled
// into the entity's field related (declared by intend.dev/std/lsm's
// #Entity), so that the output reads them: related.site.port.

// pendingRef is a reference attribute whose entity is checked once every
// entity is known.
type pendingRef struct {
	path, entity string
	pos          token.Pos
}

// reference splits the contents of an @lsm attribute, "rw" or
// "rw, ref=site", into the modifier, the referenced entity, the pool an
// r attribute is allocated from ("r, allocate=vlan") and the keys of a
// list of embedded entities ("rw+, key=name"). ok is false when the
// contents have something else (reported).
func (c *compilation) reference(fpath string, f cue.Value, contents string) (mod, ref, alloc string, keys []string, ok bool) {
	parts := strings.Split(contents, ",")
	mod = strings.TrimSpace(parts[0])
	ok = true
	for _, p := range parts[1:] {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if found && k == "key" && v != "" {
			keys = append(keys, v) // a list of embedded entities' key (embedded.go)
			continue
		}
		if pool, isAlloc := allocateOption(k, v); found && isAlloc && alloc == "" {
			alloc = pool
			continue
		}
		if !found || k != "ref" || !entityName.MatchString(v) || ref != "" {
			c.errs.addf("", fpath, attributePos(f), "@lsm(%s): after the modifier, only ref=<entity> may follow (the service entity whose instances the attribute names), or allocate=<pool> on an r attribute (the pool its value is allocated from)", contents)
			ok = false
			continue
		}
		ref = v
		c.refs = append(c.refs, pendingRef{path: fpath, entity: v, pos: attributePos(f)})
	}
	return mod, ref, alloc, keys, ok
}

// checkReference refuses a reference attribute that is read-only (the
// client chooses what an instance references) or neither a string nor a
// list of strings.
func (c *compilation) checkReference(fpath string, f cue.Value, spec lsm.AttributeSpec, schema map[string]any) bool {
	if spec.Modifier == lsm.ReadOnly {
		c.errs.addf("", fpath, attributePos(f), "a reference (ref=%s) is the client's choice: it is rw or rw+, not r", spec.References)
		return false
	}
	isString := func(s any) bool {
		m, ok := s.(map[string]any)
		return ok && m["type"] == "string"
	}
	if isString(schema) {
		return true
	}
	if m, ok := schema["type"]; ok && m == "array" && isString(schema["items"]) {
		return true
	}
	c.errs.addf("", fpath, attributePos(f), "a reference (ref=%s) is a string (an instance's id or identity) or a list of strings", spec.References)
	return false
}

// checkReferencedEntities refuses references to entities the model does
// not define.
func (c *compilation) checkReferencedEntities() {
	for _, r := range c.refs {
		if !slices.Contains(c.entityNames, r.entity) {
			c.errs.addf("", r.path, r.pos, "ref=%s names no service entity of the model (services: %s)", r.entity,
				strings.Join(c.entityNames, ", "))
		}
	}
}

// withRelated fills the entity's related field with rel (nothing when
// rel is nil); a value that is not a JSON object is an error of the
// instance, and the returned value does not exist.
func (c *compilation) withRelated(label, id string, using cue.Value, rel json.RawMessage) cue.Value {
	if rel == nil {
		return using
	}
	v := c.cue.CompileBytes(rel, cue.Filename(id+".related.json"))
	if err := v.Err(); err != nil {
		c.errs.addCUE(label, err)
		return cue.Value{}
	}
	return using.FillPath(cue.MakePath(cue.Str("related")), v)
}

// keyed is what the cache keys an instance by: its attributes and, when
// it has any, the related instances' attributes (so that a change of a
// referenced instance evaluates the referrer again).
func keyed(raw, rel json.RawMessage) json.RawMessage {
	if rel == nil {
		return raw
	}
	h := sha256.Sum256(rel)
	out := make([]byte, 0, len(raw)+1+len(h))
	out = append(append(append(out, raw...), 0), h[:]...)
	return out
}
