package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"

	"github.com/intendhq/intend/internal/lsm"
)

// Entity versions (docs/lsm.md, "Entity versions"). An entity declares its
// version (lsm.#Entity's version, 1 by default) and keeps, in previous,
// the older versions live instances still use, each a whole lsm.#Entity:
//
//	services: site: #SiteV2 & {previous: [#SiteV1]}
//
// A version n+1 says how an instance of version n becomes one of it with
// migrate: {from: _, to: {...}}, evaluated by filling from with the
// instance's attributes (Migrate).

// entityVersion is one version of an entity: what the catalog registers
// and the value its instances are evaluated with.
type entityVersion struct {
	svc   Service
	value cue.Value
}

// versions extracts the latest version's number into svc and every
// version the entity keeps, by number. ok is false when one is wrong: a
// version twice or not below the latest, a previous one that is no
// entity, or that has another lifecycle or identity (an instance keeps
// its workflow and its identity across versions).
func (c *compilation) versions(name, path string, ent cue.Value, svc *Service) (map[int]entityVersion, bool) {
	ok := true
	svc.Version, ok = c.versionOf(path, ent)
	out := map[int]entityVersion{svc.Version: {svc: *svc, value: ent}}
	prev := ent.LookupPath(cue.MakePath(cue.Str("previous")))
	if !prev.Exists() {
		return out, ok
	}
	it, err := prev.List()
	if err != nil {
		c.errs.addf("", path+".previous", c.modelPos(prev), "must be a list of older versions of the entity: %v", err)
		return out, false
	}
	for i := 0; it.Next(); i++ {
		at := fmt.Sprintf("%s.previous[%d]", path, i)
		v := it.Value()
		old, good := c.service(name, at, v)
		if old.Attributes == nil {
			ok = false
			continue
		}
		n, goodVersion := c.versionOf(at, v)
		old.Version = n
		switch {
		case !good || !goodVersion:
			ok = false
			continue
		case n >= svc.Version:
			c.errs.addf("", at+".version", c.modelPos(v), "version %d is not older than the entity's version %d: the newest version is the entity itself, previous holds the older ones", n, svc.Version)
			ok = false
			continue
		case out[n].value.Exists():
			c.errs.addf("", at+".version", c.modelPos(v), "version %d is given twice", n)
			ok = false
			continue
		case !reflect.DeepEqual(old.Lifecycle, svc.Lifecycle):
			c.errs.addf("", at+".lifecycle", c.modelPos(v), "version %d has another lifecycle than version %d: the versions of an entity share one (an instance's workflow keeps it across a migration)", n, svc.Version)
			ok = false
			continue
		case old.Identity != svc.Identity:
			c.errs.addf("", at+".identity", c.modelPos(v), "version %d has another identity (%q) than version %d (%q): the versions of an entity share it", n, old.Identity, svc.Version, svc.Identity)
			ok = false
			continue
		}
		out[n] = entityVersion{svc: old, value: v}
		c.prev = append(c.prev, old)
	}
	return out, ok
}

// addPrevious adds an entity's previous versions to the compilation's,
// sorted by entity and version.
func (c *compilation) addPrevious(prev []Service) {
	if len(prev) == 0 {
		return
	}
	c.prev = append(c.prev, prev...)
	slices.SortFunc(c.prev, func(a, b Service) int {
		if a.Name != b.Name {
			return strings.Compare(a.Name, b.Name)
		}
		return a.Version - b.Version
	})
}

// versionOf reads an entity's version (1 when it has none).
func (c *compilation) versionOf(path string, ent cue.Value) (int, bool) {
	v := ent.LookupPath(cue.MakePath(cue.Str("version")))
	if !v.Exists() {
		return 1, true
	}
	n, err := v.Int64()
	if err != nil || n < 1 || n > 1<<20 {
		c.errs.addf("", path+".version", c.modelPos(v), "must be a whole number from 1 (the entity's version)")
		return 1, false
	}
	return int(n), true
}

// versionList names the versions of vs in order, for an error.
func versionList(vs map[int]entityVersion) string {
	ns := slices.Sorted(func(yield func(int) bool) {
		for n := range vs {
			if !yield(n) {
				return
			}
		}
	})
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return strings.Join(out, ", ")
}

// MigrateOptions ask for an instance's attributes moved from one version
// of its entity to a newer one.
type MigrateOptions struct {
	// Dir is the project directory (with intend.yaml).
	Dir    string
	Entity string
	// From is the version Attributes are of; To the version wanted.
	From, To   int
	Attributes map[string]any
}

// Migrate maps an instance's attributes from version From of its entity to
// version To, one version at a time: version k's migrate.to, with
// migrate.from filled with the attributes of version k-1 (without migrate:
// the same attributes). It returns the attributes of version To that the
// mapping gives, concrete; the caller validates them as an update (the
// target version's constraints and the other instances). A step that
// fails (a version the model does not have, a mapping that is not
// concrete) is an Errors naming the step. It loads the model in this
// process: a mapping is one small evaluation, not a compile of the model.
func Migrate(ctx context.Context, opts MigrateOptions) (map[string]any, error) {
	if opts.To <= opts.From {
		return nil, fmt.Errorf("version %d is not newer than %d", opts.To, opts.From)
	}
	c, _, v, release, err := loadModel(ctx, Options{Dir: opts.Dir}, 0)
	if err != nil || c == nil {
		return nil, err
	}
	defer release()
	path := "services." + cue.MakePath(cue.Str(opts.Entity)).String()
	ent := v.LookupPath(cue.MakePath(cue.Str("services"), cue.Str(opts.Entity)))
	if !ent.Exists() {
		c.errs.addf("", path, token.NoPos, "the model has no service entity %s", opts.Entity)
		return nil, c.errs.err()
	}
	svc, _ := c.service(opts.Entity, path, ent)
	versions, _ := c.versions(opts.Entity, path, ent, &svc)
	attrs := opts.Attributes
	for k := opts.From + 1; k <= opts.To; k++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ev, ok := versions[k]
		if !ok {
			c.errs.addf("", path, token.NoPos, "the model has no version %d of %s (its versions: %s): a migration goes through every version between", k, opts.Entity, versionList(versions))
			return nil, c.errs.err()
		}
		at := fmt.Sprintf("%s (version %d).migrate", path, k)
		m := ev.value.LookupPath(cue.MakePath(cue.Str("migrate")))
		if !m.Exists() {
			continue // the same attributes
		}
		from, err := json.Marshal(attrs)
		if err != nil {
			return nil, err
		}
		to := m.FillPath(cue.MakePath(cue.Str("from")), c.cue.CompileBytes(from, cue.Filename(fmt.Sprintf("%s/version-%d.json", opts.Entity, k-1))))
		out := to.LookupPath(cue.MakePath(cue.Str("to")))
		if err := out.Validate(cue.Concrete(true)); err != nil {
			c.errs.addCUE(at, err)
			return nil, c.errs.err()
		}
		b, err := out.MarshalJSON()
		if err != nil {
			c.errs.addf(at, "to", token.NoPos, "%v", err)
			return nil, c.errs.err()
		}
		var next map[string]any
		if err := json.Unmarshal(b, &next); err != nil {
			c.errs.addf(at, "to", token.NoPos, "is not a struct of attributes: %v", err)
			return nil, c.errs.err()
		}
		// r attributes are the target version's to compute.
		attrs = lsm.WithoutReadOnly(ev.svc.Attributes, next)
	}
	return attrs, nil
}
