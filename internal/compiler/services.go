package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"

	"github.com/intendhq/intend/internal/lsm"
)

// entityName is what a service entity may be called: its name is a
// segment of the inventory API's paths and of its workflows' ids, and the
// prefix of its instances' resource sets ("<entity>/<id>").
var entityName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// services extracts every service entity for the catalog and evaluates
// the instances Options.Instances gives for it, as refinement instances.
func (c *compilation) services(svcs, refs cue.Value) error {
	if !svcs.Exists() {
		return nil
	}
	it, err := svcs.Fields()
	if err != nil {
		c.errs.addCUE("", err)
		return nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		ent := it.Value()
		path := "services." + it.Selector().String()
		if !entityName.MatchString(name) {
			c.errs.addf("", path, c.modelPos(ent), "a service entity's name is a letter and then letters, digits, '_' or '-' (it is a segment of API paths and resource sets)")
			continue
		}
		if refs.LookupPath(cue.MakePath(cue.Str(name))).Exists() {
			c.errs.addf("", path, c.modelPos(ent), "refinements.%s has this name too: their instances and resource sets would mix", name)
			continue
		}
		x := c.entity(name, path, ent)
		c.entityNames = append(c.entityNames, name)
		if x.svc.Attributes == nil {
			continue // no parameter or output to evaluate instances with
		}
		svc, versions := x.svc, x.versions
		if x.ok {
			c.svcs = append(c.svcs, svc)
		}
		extra := c.opts.Instances[name]
		for _, id := range slices.Sorted(mapKeys(extra)) {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			label := path + ".instances." + id
			v, ok := versions[svc.Version], true
			key := name
			if n := c.opts.InstanceVersions[name][id]; n > 0 && n != svc.Version {
				v, ok = versions[n]
				key = fmt.Sprintf("%s@%d", name, n) // another version's output: another cache entry
			}
			if !ok {
				c.errs.addf(label, "version", token.NoPos, "the model has no version %d of %s (its versions: %s)",
					c.opts.InstanceVersions[name][id], name, versionList(versions))
				continue
			}
			c.external(name, key, label, id, v.value, extra[id], func() { c.knownAttributes(label, v.svc.Attributes, extra[id]) })
		}
	}
	c.checkReferencedEntities()
	return nil
}

// extracted is what extracting an entity gave (service, then versions):
// pure per model, so a built model keeps it for the compiles after
// (models.go) when they evaluate the model as built (no facts filled in).
type extracted struct {
	svc      Service
	versions map[int]entityVersion
	ok       bool // the entity and its versions are right: it is in the catalog
	// errs, refs and prev are what the extraction added to the
	// compilation's errors (every one, before they are deduplicated),
	// its references to check and its previous versions.
	errs []*Error
	refs []pendingRef
	prev []Service
}

// entity extracts an entity, or takes what an earlier compile of the
// built model extracted, and adds its errors, references and previous
// versions to the compilation's.
func (c *compilation) entity(name, path string, ent cue.Value) *extracted {
	if c.model != nil {
		if x, ok := c.model.entities[name]; ok {
			for _, e := range x.errs {
				copied := *e
				c.errs.add(&copied)
			}
			c.refs = append(c.refs, x.refs...)
			c.addPrevious(x.prev)
			return x
		}
	}
	x := &extracted{}
	refs, prev := len(c.refs), c.prev
	c.prev = nil
	c.errs.record = &x.errs
	svc, ok := c.service(name, path, ent)
	good := true
	if svc.Attributes != nil {
		x.versions, good = c.versions(name, path, ent, &svc)
	}
	c.errs.record = nil
	x.svc, x.ok = svc, ok && good
	x.refs = slices.Clone(c.refs[refs:])
	x.prev = c.prev
	c.prev = prev
	c.addPrevious(x.prev)
	if c.model != nil {
		c.model.entities[name] = x
	}
	return x
}

// knownAttributes refuses the attributes of an instance that its entity
// does not have: the parameter of #Entity is open, so CUE would take them.
func (c *compilation) knownAttributes(label string, specs []lsm.AttributeSpec, raw json.RawMessage) {
	var attrs map[string]json.RawMessage
	if json.Unmarshal(raw, &attrs) != nil {
		return // not an object: the evaluation says so
	}
	for _, name := range slices.Sorted(mapKeys(attrs)) {
		if !slices.ContainsFunc(specs, func(s lsm.AttributeSpec) bool { return s.Name == name }) {
			c.errs.addf(label, "parameter."+cue.MakePath(cue.Str(name)).String(), token.NoPos, "the entity has no attribute %q", name)
		}
	}
}

// service extracts one entity. ok is false when it has errors; the
// Service's Attributes are nil when it has no parameter or output to
// evaluate instances with, and non-nil otherwise.
func (c *compilation) service(name, path string, ent cue.Value) (svc Service, ok bool) {
	svc = Service{Name: name}
	param := ent.LookupPath(cue.MakePath(cue.Str("parameter")))
	if !param.Exists() || !ent.LookupPath(cue.MakePath(cue.Str("output"))).Exists() {
		c.errs.addf("", path, c.modelPos(ent), "a service entity needs a parameter and an output: declare it as lsm.#Entity & {...} (import \"%s/lsm\")", StdModule)
		return svc, false
	}
	ok = true
	if d := ent.LookupPath(cue.MakePath(cue.Str("description"))); d.Exists() {
		if s, err := d.String(); err != nil {
			c.errs.addf("", path+".description", c.modelPos(d), "must be a string: %v", err)
			ok = false
		} else {
			svc.Description = s
		}
	}
	svc.Attributes = []lsm.AttributeSpec{}
	it, err := param.Fields(cue.Optional(true))
	if err != nil {
		c.errs.addCUE("", err)
		return svc, false
	}
	for it.Next() {
		spec, good := c.attribute(path+".parameter", it.Selector(), it.Value(), 0)
		svc.Attributes = append(svc.Attributes, spec)
		ok = ok && good
	}
	if id := ent.LookupPath(cue.MakePath(cue.Str("identity"))); id.Exists() {
		s, err := id.String()
		switch {
		case err != nil:
			c.errs.addf("", path+".identity", c.modelPos(id), "must name a field of the parameter: %v", err)
			ok = false
		case !slices.ContainsFunc(svc.Attributes, func(a lsm.AttributeSpec) bool { return a.Name == s }):
			c.errs.addf("", path+".identity", c.modelPos(id), "names %q, which is not a field of the parameter", s)
			ok = false
		default:
			svc.Identity = s
		}
	}
	lc := ent.LookupPath(cue.MakePath(cue.Str("lifecycle")))
	if !lc.Exists() || !lc.LookupPath(cue.MakePath(cue.Str("name"))).IsConcrete() && !hasFields(lc.LookupPath(cue.MakePath(cue.Str("states")))) {
		// Only lsm.#Entity's declaration: say what is missing, not
		// that its name is incomplete.
		c.errs.addf("", path+".lifecycle", c.modelPos(ent), "a service entity needs a lifecycle: lsm.simple or one of your own")
		return svc, false
	}
	l, good := c.lifecycle(path+".lifecycle", lc)
	svc.Lifecycle = l
	return svc, ok && good
}

// hasFields reports whether v is a struct with at least one regular
// field.
func hasFields(v cue.Value) bool {
	it, err := v.Fields()
	return err == nil && it.Next()
}

// attribute extracts one field of an entity's parameter, or of an
// embedded entity depth levels inside it.
func (c *compilation) attribute(path string, sel cue.Selector, f cue.Value, depth int) (lsm.AttributeSpec, bool) {
	name := sel.Unquoted()
	fpath := path + "." + cue.MakePath(cue.Str(name)).String()
	spec := lsm.AttributeSpec{Name: name, Modifier: lsm.ReadWrite, Description: docText(f)}
	ok := true
	var mods []string
	for _, a := range f.Attributes(cue.FieldAttr) {
		if a.Name() == "lsm" {
			mods = append(mods, strings.TrimSpace(a.Contents()))
		}
	}
	for _, m := range mods[min(1, len(mods)):] {
		if m != mods[0] {
			c.errs.addf("", fpath, attributePos(f), "two modifiers, @lsm(%s) and @lsm(%s): give one", mods[0], m)
			ok = false
		}
	}
	var keys []string
	if len(mods) > 0 {
		mod, ref, alloc, ks, refOK := c.reference(fpath, f, mods[0])
		keys = ks
		m, err := lsm.ParseModifier(mod)
		if err != nil {
			c.errs.addf("", fpath, attributePos(f), "@lsm(%s): a modifier is r (read-only, set by the server), rw (set at creation) or rw+ (updatable)", mods[0])
			ok = false
		}
		spec.Modifier, spec.References, spec.Allocate = m, ref, alloc
		ok = ok && refOK
	}
	def, hasDefault := fieldDefault(f)
	spec.Default = def
	spec.Required = isRequired(sel, hasDefault)
	schema := jsonSchema(f)
	if spec.Description != "" {
		schema["description"] = spec.Description
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // maps, strings, numbers and raw JSON from CUE
	}
	spec.Schema = b
	if spec.References != "" && !c.checkReference(fpath, f, spec, schema) {
		ok = false
	}
	if e, good := c.embedded(fpath, f, keys, depth); e != nil || !good {
		spec.Embedded = e
		ok = ok && good
	}
	if spec.Allocate != "" && !c.checkAllocate(fpath, f, spec) {
		ok = false
	}
	return spec, ok
}

// attributePos is where a field's @lsm attribute is written, or the
// field's position when CUE does not tell.
func attributePos(f cue.Value) token.Pos {
	if fd, ok := f.Source().(*ast.Field); ok {
		for _, a := range fd.Attrs {
			if strings.HasPrefix(a.Text, "@lsm(") {
				return a.Pos()
			}
		}
	}
	return f.Pos()
}

// lifecycle decodes an entity's lifecycle and checks it, each problem an
// error at the transfer or state at fault.
func (c *compilation) lifecycle(path string, lc cue.Value) (lsm.Lifecycle, bool) {
	var l lsm.Lifecycle
	if err := lc.Validate(cue.Concrete(true)); err != nil {
		c.errs.addCUE("", err)
		return l, false
	}
	b, err := lc.MarshalJSON()
	if err != nil {
		c.errs.addCUE("", err)
		return l, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		c.errs.addf("", path, c.modelPos(lc), "is not an lsm.#Lifecycle: %v", err)
		return l, false
	}
	err = l.Check()
	var ce *lsm.CheckError
	if !errors.As(err, &ce) {
		return l, err == nil
	}
	for _, p := range ce.Problems {
		at, where := path, lc
		switch {
		case p.Transfer >= 0:
			at = fmt.Sprintf("%s.transfers[%d]", path, p.Transfer)
			where = lc.LookupPath(cue.MakePath(cue.Str("transfers"), cue.Index(p.Transfer)))
		case p.Rule == lsm.RuleStart:
			at = path + ".start"
			where = lc.LookupPath(cue.MakePath(cue.Str("start")))
		case p.State != "":
			sel := cue.Str(p.State)
			at = path + ".states." + cue.MakePath(sel).String()
			where = lc.LookupPath(cue.MakePath(cue.Str("states"), sel))
		}
		c.errs.addf("", at, c.modelPos(where), "%s", p.Message)
	}
	return l, false
}

// modelPos is where the model itself writes v: a value unified with a
// definition of the standard library (a transfer with lsm.#Transfer) has
// the definition's position first, which tells the model's author
// nothing.
func (c *compilation) modelPos(v cue.Value) token.Pos {
	pos := v.Pos()
	if op, args := v.Expr(); op == cue.AndOp {
		for _, a := range args {
			if p := a.Pos(); p.IsValid() && !strings.HasPrefix(p.Filename(), c.errs.stdAt+string(filepath.Separator)) {
				return p
			}
		}
	}
	return pos
}
