package compiler

import (
	"encoding/json"
	"slices"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"
)

// refinements evaluates every instance of every refinement on its own.
func (c *compilation) refinements(refs cue.Value) error {
	if !refs.Exists() {
		return nil
	}
	it, err := refs.Fields()
	if err != nil {
		c.errs.addCUE("", err)
		return nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		ref := it.Value()
		path := "refinements." + it.Selector().String()
		using := ref.LookupPath(cue.MakePath(cue.Str("using")))
		if !using.Exists() {
			c.errs.addf("", path, ref.Pos(), "a refinement needs using: the definition with a parameter and an output")
			continue
		}
		if !using.LookupPath(cue.MakePath(cue.Str("output"))).Exists() {
			c.errs.addf("", path+".using", using.Pos(), "the refinement's definition has no output")
			continue
		}
		each := func(inst string, param cue.Value) error {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			c.instance(name, path+".instances."+inst, inst, using, param)
			return nil
		}
		if insts := ref.LookupPath(cue.MakePath(cue.Str("instances"))); insts.Exists() {
			ii, err := insts.Fields()
			if err != nil {
				c.errs.addCUE("", err)
				continue
			}
			for ii.Next() {
				if err := each(ii.Selector().Unquoted(), ii.Value()); err != nil {
					return err
				}
			}
		}
		extra := c.opts.Instances[name]
		for _, inst := range slices.Sorted(mapKeys(extra)) {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			c.external(name, name, path+".instances."+inst, inst, using, extra[inst], nil)
		}
	}
	return nil
}

// external evaluates an instance given as JSON (Options.Instances),
// taking its resources from the cache when an earlier compile of the same
// model evaluated the same instance; check runs before an evaluation.
func (c *compilation) external(name, cacheName, label, id string, using cue.Value, raw json.RawMessage, check func()) {
	var key [32]byte
	rel := c.opts.Related[name][id]
	if c.keys != nil {
		key = c.keys.key(cacheName, id, keyed(raw, rel))
		if e, ok := c.opts.Cache.get(key); ok {
			c.instances++
			for _, r := range e.resources {
				c.add(r)
			}
			c.param(name, id, e.parameter)
			return
		}
	}
	errsBefore, outBefore := len(c.errs.list), len(c.out)
	if check != nil {
		check()
	}
	p := c.cue.CompileBytes(raw, cue.Filename(name+"/"+id+".json"))
	if err := p.Err(); err != nil {
		c.errs.addCUE(label, err)
		return
	}
	if using = c.withRelated(label, id, using, rel); !using.Exists() {
		return
	}
	param := c.instance(name, label, id, using, p)
	if len(c.errs.list) != errsBefore {
		return
	}
	c.param(name, id, param)
	if c.keys != nil {
		// The cached copies keep their positions resolved: a token.Pos
		// holds on to its file, and through it to the whole model this
		// compile parsed (120 KiB a compile, which took a compile
		// worker past its memory limit after some 10,000 compiles).
		rs := slices.Clone(c.out[outBefore:])
		for i := range rs {
			rs[i].at, rs[i].pos = c.where(&rs[i]), token.NoPos
		}
		c.opts.Cache.put(key, cacheEntry{resources: rs, parameter: param})
	}
}

// param records an external instance's evaluated parameter.
func (c *compilation) param(name, id string, param json.RawMessage) {
	if param == nil {
		return
	}
	if c.params == nil {
		c.params = map[string]map[string]json.RawMessage{}
	}
	if c.params[name] == nil {
		c.params[name] = map[string]json.RawMessage{}
	}
	c.params[name][id] = param
}

// instance evaluates one refinement instance: using & {parameter: param}.
// It returns the evaluated parameter as JSON (nil when it has errors).
func (c *compilation) instance(refinement, label, name string, using, param cue.Value) json.RawMessage {
	c.instances++
	v := using.FillPath(cue.MakePath(cue.Str("parameter")), param)
	pv := v.LookupPath(cue.MakePath(cue.Str("parameter")))
	if err := pv.Validate(cue.Concrete(true)); err != nil {
		c.errs.addCUE(label, err)
		return nil
	}
	w := &walker{c: c, instance: label, set: refinement + "/" + name}
	w.walk(v.LookupPath(cue.MakePath(cue.Str("output"))), "output")
	b, err := pv.MarshalJSON()
	if err != nil {
		return nil // concrete, so only an oddity of CUE's encoder: no parameters then
	}
	return b
}
