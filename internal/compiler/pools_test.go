package compiler

import (
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
)

const poolsModel = `package main

import "intend.dev/std/lsm"

pools: {
	vlan: lsm.#Pool & {kind: "vlan", from: 100, to: 199}
	p2p:  lsm.#Pool & {kind: "cidr", prefix: "10.0.0.0/16", size: 30}
	asn:  {kind: "range", from: 64512, to: 65534}
}

services: link: lsm.#Entity & {
	lifecycle: lsm.simple
	parameter: {
		name:    string @lsm(rw)
		vlan_id: int @lsm(r, allocate=vlan)
		subnet:  string @lsm(r, allocate=p2p)
		asn:     int @lsm( r , allocate = asn )
	}
	output: {}
}
`

// TestPools: the model's pools come with the catalog, and allocate=<pool>
// with the attribute; a pool or an allocate= that is wrong is refused
// where it is written.
func TestPools(t *testing.T) {
	t.Parallel()
	res, errs := compileServices(t, map[string]string{"main.cue": poolsModel}, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	want := []lsm.Pool{
		{Name: "asn", Kind: lsm.PoolRange, From: 64512, To: 65534},
		{Name: "p2p", Kind: lsm.PoolCIDR, Prefix: "10.0.0.0/16", Size: 30},
		{Name: "vlan", Kind: lsm.PoolVLAN, From: 100, To: 199},
	}
	if len(res.Pools) != len(want) {
		t.Fatalf("pools %+v, want %+v", res.Pools, want)
	}
	for i := range want {
		if res.Pools[i] != want[i] {
			t.Errorf("pool %d: %+v, want %+v", i, res.Pools[i], want[i])
		}
	}
	alloc := map[string]string{}
	for _, a := range res.Services[0].Attributes {
		alloc[a.Name] = a.Allocate
	}
	if alloc["vlan_id"] != "vlan" || alloc["subnet"] != "p2p" || alloc["asn"] != "asn" || alloc["name"] != "" {
		t.Errorf("allocate: %v", alloc)
	}
	for _, c := range []struct{ why, from, to, want, at string }{
		{"no such pool", `int @lsm(r, allocate=vlan)`, `int @lsm(r, allocate=nosuch)`, "allocate=nosuch names no pool of the model (pools: asn, p2p, vlan)", "services.link.parameter.vlan_id"},
		{"not r", `int @lsm(r, allocate=vlan)`, `int @lsm(rw, allocate=vlan)`, "it is r, not rw", "services.link.parameter.vlan_id"},
		{"a string from a vlan pool", `int @lsm(r, allocate=vlan)`, `string @lsm(r, allocate=vlan)`, "gives an integer", "services.link.parameter.vlan_id"},
		{"an int from a cidr pool", `string @lsm(r, allocate=p2p)`, `int @lsm(r, allocate=p2p)`, "gives a string", "services.link.parameter.subnet"},
		{"two pools", `int @lsm(r, allocate=vlan)`, `int @lsm(r, allocate=vlan, allocate=asn)`, "only ref=<entity> may follow", "services.link.parameter.vlan_id"},
		{"a vlan beyond 4094", `to: 199}`, `to: 4095}`, "", "pools.vlan"},
		{"a vlan from 0", `from: 100,`, `from: 0,`, "", "pools.vlan"},
		{"host bits", `"10.0.0.0/16"`, `"10.0.0.1/16"`, "has host bits set", "pools.p2p"},
		{"a size shorter than the prefix", `size: 30`, `size: 8`, "not between the prefix's length 16 and 32", "pools.p2p"},
		{"a reversed range", `from: 64512, to: 65534`, `from: 65534, to: 64512`, "from (65534) is above to (64512)", "pools.asn"},
		{"an unknown kind", `kind: "range"`, `kind: "ipv4"`, "kind \"ipv4\" is none of range, vlan, cidr", "pools.asn"},
		{"an unknown field", `kind: "range"`, `kind: "range", step: 2`, "is not an lsm.#Pool", "pools.asn"},
	} {
		model := strings.Replace(poolsModel, c.from, c.to, 1)
		if model == poolsModel {
			t.Fatalf("%s: %q is not in the model", c.why, c.from)
		}
		_, errs := compileServices(t, map[string]string{"main.cue": model}, nil)
		if errs == nil || !strings.Contains(errs.Error(), c.want) || !strings.Contains(errs.Error(), c.at) {
			t.Errorf("%s: %v, want %q at %s", c.why, errs, c.want, c.at)
		}
	}
}
