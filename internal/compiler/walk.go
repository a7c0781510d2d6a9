package compiler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/intendhq/intend/adapters/resource"
)

// check refuses requires that name no resource of the version.
func (c *compilation) check() {
	for _, r := range c.out {
		for _, req := range r.Requires {
			if _, ok := c.ids[req]; !ok {
				c.errs.addfAt("", r.Origin, c.where(&r), "requires %s, which the model does not produce", req)
			}
		}
	}
}

// add records one resource, refusing a second one with the same id.
func (c *compilation) add(r Resource) {
	if i, ok := c.ids[r.ID]; ok {
		first := c.out[i]
		at := ""
		if p := c.where(&first); p != nil {
			at = " (" + p.String() + ")"
		}
		c.errs.addfAt("", r.Origin, c.where(&r), "duplicate id %s: %s%s produces it too", r.ID, first.Origin, at)
		return
	}
	c.ids[r.ID] = len(c.out)
	c.out = append(c.out, r)
}

// walker finds the resources in a value.
type walker struct {
	c        *compilation
	instance string // the refinement instance, or ""
	set      string // the default resource set
}

func (w *walker) origin(path string) string {
	if w.instance == "" {
		return path
	}
	return w.instance + ": " + path
}

func (w *walker) walk(v cue.Value, path string) {
	// A struct or list with an error inside is bottom, but still has its
	// fields or elements: walk them, to report every error, not the first.
	kind := v.IncompleteKind()
	if kind == cue.BottomKind {
		if _, err := v.Fields(); err == nil {
			kind = cue.StructKind
		} else if _, err := v.List(); err == nil {
			kind = cue.ListKind
		} else {
			w.c.errs.addCUE(w.instance, v.Err())
			return
		}
	}
	switch kind {
	case cue.StructKind:
		if v.LookupPath(cue.MakePath(cue.Str("id"))).Exists() {
			w.resource(v, path)
			return
		}
		it, err := v.Fields()
		if err != nil {
			w.c.errs.addCUE(w.instance, err)
			return
		}
		for it.Next() {
			w.walk(it.Value(), path+"."+it.Selector().String())
		}
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			w.c.errs.addCUE(w.instance, err)
			return
		}
		for i := 0; it.Next(); i++ {
			w.walk(it.Value(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		w.c.errs.addf(w.instance, path, v.Pos(), "is %s, not a resource (a struct with an id) nor a struct or list of them", kind)
	}
}

// meta are the fields of resource.#Resource: everything else is an
// attribute.
var meta = map[string]bool{
	"id": true, "agent": true, "requires": true, "purged": true, "send_event": true,
	"receive_events": true, "report_only": true, "resource_set": true, "unmanaged": true,
}

// resource decodes one resource.
func (w *walker) resource(v cue.Value, path string) {
	errs := w.c.errs
	r := Resource{Origin: w.origin(path), pos: v.Pos(), ResourceSet: w.set, Attributes: map[string]json.RawMessage{}, Requires: []string{}}
	idv := v.LookupPath(cue.MakePath(cue.Str("id")))
	id, err := idv.String()
	if err != nil {
		if w.c.unknownFact(err) {
			errs.addf(w.instance, path+".id", idv.Pos(), "the id depends on a fact that is not known yet; an id must be known when the model is compiled")
			return
		}
		// Report the causes (a missing or wrong identifying attribute),
		// not only the id that could not be built from them.
		if verr := v.Validate(cue.Concrete(true)); verr != nil {
			errs.addCUE(w.instance, verr)
		} else {
			errs.addCUE(w.instance, err)
		}
		return
	}
	rid, err := resource.Parse(id)
	if err != nil {
		errs.addf(w.instance, path+".id", idv.Pos(), "%v", err)
		return
	}
	if rid.Version != 0 {
		errs.addf(w.instance, path+".id", idv.Pos(), "id %s names a version; a model's ids never do", id)
		return
	}
	r.ID = id
	ok := true
	// Conflicts and fields the type does not allow, all of them (the
	// loop below finds what is missing).
	if err := v.Validate(); err != nil {
		errs.addCUE(w.instance, err)
		ok = false
	}
	it, err := v.Fields()
	if err != nil {
		errs.addCUE(w.instance, err)
		return
	}
	allowed := w.c.attributes(rid.Type)
	for it.Next() {
		label := it.Selector().Unquoted()
		fv := it.Value()
		fpath := path + "." + it.Selector().String()
		if allowed != nil && !allowed[label] && !meta[label] {
			// CUE reports one error per struct: a field the type does
			// not allow goes unreported beside a conflict. Say it too.
			errs.addf(w.instance, fpath, fv.Pos(), "field not allowed")
			ok = false
			continue
		}
		if label == "requires" {
			// Only the ids of what it refers to matter, and they may
			// still be undefined themselves.
			ok = w.requires(&r, fv, fpath) && ok
			continue
		}
		if err := fv.Validate(cue.Concrete(true)); err != nil {
			if !meta[label] && w.c.unknownFact(err) {
				r.Undefined = true
				continue
			}
			errs.addCUE(w.instance, err)
			ok = false
			continue
		}
		switch label {
		case "id", "agent":
		case "purged":
			r.Purged, _ = fv.Bool()
		case "send_event":
			r.SendEvent, _ = fv.Bool()
		case "receive_events":
			r.ReceiveEvents, _ = fv.Bool()
		case "report_only":
			r.ReportOnly, _ = fv.Bool()
		case "unmanaged":
			r.Unmanaged, _ = fv.Bool()
		case "resource_set":
			r.ResourceSet, _ = fv.String()
		default:
			b, err := fv.MarshalJSON()
			if err != nil {
				errs.addCUE(w.instance, err)
				ok = false
				continue
			}
			r.Attributes[label] = b
		}
	}
	if !ok {
		return
	}
	if r.Undefined {
		if _, known := r.Attributes[rid.Attribute]; !known {
			errs.addf(w.instance, path+"."+rid.Attribute, v.Pos(), "the identifying attribute depends on a fact that is not known yet")
			return
		}
		if r.Purged {
			errs.addf(w.instance, path, v.Pos(), "a purged resource cannot depend on a fact that is not known yet")
			return
		}
	}
	w.c.add(r)
}

// attributes returns the attributes a standard-library type allows (nil
// for a type of the model's own), from its definition: "ns::Name" is
// #Name of intend.dev/std/ns.
func (c *compilation) attributes(typ string) map[string]bool {
	if a, ok := c.allowed[typ]; ok {
		return a
	}
	if c.allowed == nil {
		c.allowed = map[string]map[string]bool{}
	}
	var allowed map[string]bool
	defer func() { c.allowed[typ] = allowed }()
	ns, name, ok := strings.Cut(typ, "::")
	inst := c.std[StdModule+"/"+ns]
	if !ok || inst == nil || strings.Contains(name, "::") {
		return nil
	}
	def := c.cue.BuildInstance(inst).LookupPath(cue.MakePath(cue.Def("#" + name)))
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	allowed = map[string]bool{}
	for it.Next() {
		allowed[it.Selector().Unquoted()] = true
	}
	return allowed
}

// requires takes the ids of the resources (or the id strings) listed.
func (w *walker) requires(r *Resource, v cue.Value, path string) bool {
	it, err := v.List()
	if err != nil {
		w.c.errs.addCUE(w.instance, err)
		return false
	}
	for i := 0; it.Next(); i++ {
		e := it.Value()
		if e.Kind() == cue.StructKind {
			e = e.LookupPath(cue.MakePath(cue.Str("id")))
		}
		s, err := e.String()
		if err != nil {
			w.c.errs.addf(w.instance, fmt.Sprintf("%s[%d]", path, i), e.Pos(), "must be a resource or a resource id: %v", err)
			return false
		}
		if _, err := resource.Parse(s); err != nil {
			w.c.errs.addf(w.instance, fmt.Sprintf("%s[%d]", path, i), e.Pos(), "%v", err)
			return false
		}
		if s == r.ID {
			w.c.errs.addf(w.instance, fmt.Sprintf("%s[%d]", path, i), e.Pos(), "a resource cannot require itself")
			return false
		}
		r.Requires = append(r.Requires, s)
	}
	slices.Sort(r.Requires)
	r.Requires = slices.Compact(r.Requires)
	return true
}

// unknownFact reports whether every error in err involves a lookup into
// facts: a fact not known yet. Any other problem, a missing attribute for
// one, is an error of the model.
func (c *compilation) unknownFact(err error) bool {
	errs := cueerrors.Errors(err)
	if len(errs) == 0 {
		return false
	}
	for _, e := range errs {
		if !slices.ContainsFunc(cueerrors.Positions(e), c.factLookupAt) {
			return false
		}
	}
	return true
}

// factLookupAt reports whether the source at pos is a selection or index
// whose innermost operand is the identifier facts.
func (c *compilation) factLookupAt(pos token.Pos) bool {
	f := c.files[pos.Filename()]
	if f == nil {
		return false
	}
	found := false
	ast.Walk(f, func(n ast.Node) bool {
		if found {
			return false
		}
		var x ast.Expr
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if !samePos(n.Sel.Pos(), pos) && !samePos(n.Pos(), pos) {
				return true
			}
			x = n.X
		case *ast.IndexExpr:
			if !samePos(n.Index.Pos(), pos) && !samePos(n.Pos(), pos) && !samePos(n.Lbrack, pos) {
				return true
			}
			x = n.X
		default:
			return true
		}
		found = rootedInFacts(x)
		return !found
	}, nil)
	return found
}

func samePos(a, b token.Pos) bool {
	return a.IsValid() && b.IsValid() && a.Filename() == b.Filename() && a.Offset() == b.Offset()
}

func rootedInFacts(x ast.Expr) bool {
	for {
		switch n := x.(type) {
		case *ast.SelectorExpr:
			x = n.X
		case *ast.IndexExpr:
			x = n.X
		case *ast.Ident:
			return n.Name == "facts"
		default:
			return false
		}
	}
}

func mapKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
