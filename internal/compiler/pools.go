package compiler

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/intendhq/intend/internal/lsm"
)

// Allocation pools (issue 31): the model declares them at the top level,
//
//	pools: vlan: lsm.#Pool & {kind: "vlan", from: 100, to: 199}
//
// and an r attribute names the one its value comes from:
// vlan_id: int @lsm(r, allocate=vlan). The compile checks both and
// gives the pools with the entities (Result.Pools); the server
// allocates (internal/store/lsm_alloc.go).

// pools extracts the model's pools (sorted by name) into c.pools.
func (c *compilation) pools(v cue.Value) {
	c.poolsByName = map[string]lsm.Pool{}
	if !v.Exists() {
		return
	}
	it, err := v.Fields()
	if err != nil {
		c.errs.addCUE("", err)
		return
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		pv := it.Value()
		path := "pools." + it.Selector().String()
		if err := pv.Validate(cue.Concrete(true)); err != nil {
			c.errs.addCUE("", err)
			continue
		}
		b, err := pv.MarshalJSON()
		if err != nil {
			c.errs.addCUE("", err)
			continue
		}
		p := lsm.Pool{Name: name}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil || p.Name != name {
			c.errs.addf("", path, c.modelPos(pv), "is not an lsm.#Pool ({kind: \"range\"|\"vlan\", from, to} or {kind: \"cidr\", prefix, size}): %s", poolDecodeError(err))
			continue
		}
		if err := p.Check(); err != nil {
			c.errs.addf("", path, c.modelPos(pv), "%v", err)
			continue
		}
		c.poolsByName[name] = p
		c.poolList = append(c.poolList, p)
	}
	slices.SortFunc(c.poolList, func(a, b lsm.Pool) int { return strings.Compare(a.Name, b.Name) })
}

func poolDecodeError(err error) string {
	if err == nil {
		return "name is the pool's key"
	}
	return err.Error()
}

// checkAllocate refuses an allocate= that names no pool of the model, on
// an attribute that is not r, or whose type does not take the pool's
// values.
func (c *compilation) checkAllocate(fpath string, f cue.Value, spec lsm.AttributeSpec) bool {
	pos := attributePos(f)
	p, ok := c.poolsByName[spec.Allocate]
	if !ok {
		names := slices.Sorted(mapKeys(c.poolsByName))
		list := "none"
		if len(names) > 0 {
			list = strings.Join(names, ", ")
		}
		c.errs.addf("", fpath, pos, "allocate=%s names no pool of the model (pools: %s): declare it under pools", spec.Allocate, list)
		return false
	}
	if problems := lsm.CheckPools([]lsm.Pool{p}, []lsm.Entity{{Name: "x", Attributes: []lsm.AttributeSpec{spec}}}); len(problems) > 0 {
		_, msg, _ := strings.Cut(problems[0], ": ")
		c.errs.addf("", fpath, pos, "%s", msg)
		return false
	}
	return true
}

// allocateOption parses one option of an @lsm attribute, allocate=<pool>;
// ok is false when it is another option.
func allocateOption(k, v string) (pool string, ok bool) {
	if k != "allocate" || !lsm.ValidPoolName(v) {
		return "", false
	}
	return v, true
}
