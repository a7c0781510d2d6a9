package main

import (
	"strings"
	"testing"
)

// poolsModel is a vm entity whose vlan comes from a pool of VLANs 100 to
// last.
func poolsModel(last string) string {
	return `package main

import "intend.dev/std/lsm"

pools: vlan: lsm.#Pool & {kind: "vlan", from: 100, to: ` + last + `}

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		vlan: int @lsm(r, allocate=vlan)
	}
	output: {}
}

services: vm: #VM
`
}

// TestLSMPoolsCommand: intend lsm pools lists the pools with their usage,
// intend lsm pools NAME who holds which value; a create on an exhausted
// pool fails naming it; a later export that widens the pool (staged, then
// released) makes room.
func TestLSMPoolsCommand(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmpools")
	writeProject(t, vars, "lsmpools", poolsModel("101"))
	ok(t, vars, "lsm", "create", "vm", "--attr", "name=web", "--wait", "up")
	ok(t, vars, "lsm", "create", "vm", "--attr", "name=db", "--wait", "up")
	fails(t, vars, 1, []string{"pool vlan (vlan 100–101) is exhausted"}, "lsm", "create", "vm", "--attr", "name=ftp")
	out := ok(t, vars, "lsm", "pools")
	// POOL KIND VALUES SIZE USED FREE
	if row := rowOf(t, out, "vlan"); strings.Join(row, " ") != "vlan vlan 100–101 2 2 0" {
		t.Errorf("pools:\n%s", out)
	}
	out = ok(t, vars, "lsm", "pools", "vlan")
	if field(t, out, "used") != "2 of 2 (0 free)" || rowOf(t, out, "100")[3] != "vlan" || rowOf(t, out, "101")[1] != "vm" {
		t.Errorf("pools vlan:\n%s", out)
	}
	if out = ok(t, vars, "lsm", "pools", "vlan", "--json"); !strings.Contains(out, `"allocations"`) || !strings.Contains(out, `"value": 101`) {
		t.Errorf("pools vlan --json:\n%s", out)
	}
	if out = ok(t, vars, "lsm", "pools", "--json"); !strings.Contains(out, `"items"`) || !strings.Contains(out, `"used": 2`) {
		t.Errorf("pools --json:\n%s", out)
	}
	fails(t, vars, 1, []string{"404"}, "lsm", "pools", "nosuch")

	// The export is staged: the catalog (pools included) changes when
	// its version is released.
	writeProject(t, vars, "lsmpools", poolsModel("102"))
	if out = ok(t, vars, "lsm", "pools"); strings.Join(rowOf(t, out, "vlan"), " ") != "vlan vlan 100–101 2 2 0" {
		t.Errorf("pools after the export, before its release:\n%s", out)
	}
	ok(t, vars, "versions", "release", "2")
	// A create's dry-run shows the value it would get, and takes none;
	// an initial state the lifecycle does not allow is the create's 422.
	if out = ok(t, vars, "lsm", "dryrun", "vm", "--create", "--attr", "name=ftp"); !strings.Contains(out,
		"allocated: vlan = 102 from pool vlan (provisional") {
		t.Errorf("dryrun --create:\n%s", out)
	}
	fails(t, vars, 1, []string{"422", "/initial_state"}, "lsm", "dryrun", "vm", "--create", "--attr", "name=ftp", "--initial-state", "up")
	fails(t, vars, exitUsage, []string{"--initial-state go with --create only"}, "lsm", "dryrun", "vm", "web", "--initial-state", "up")
	ftp := ok(t, vars, "lsm", "create", "vm", "--attr", "name=ftp", "--wait", "up")
	if out = ok(t, vars, "lsm", "pools"); strings.Join(rowOf(t, out, "vlan"), " ") != "vlan vlan 100–102 3 3 0" {
		t.Errorf("pools after widening:\n%s\n(create: %s)", out, ftp)
	}
}
