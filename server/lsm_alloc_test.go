package server_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/names"
)

// lsmAllocModel is a vm entity whose vlan and subnet the server
// allocates from two pools of two values each; its file shows them.
func lsmAllocModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

pools: {
	vlan: lsm.#Pool & {kind: "vlan", from: 100, to: 101}
	p2p:  lsm.#Pool & {kind: "cidr", prefix: "10.0.0.0/29", size: 30}
}

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:   =~"^[a-z]+$" @lsm(rw)
		vlan:   int @lsm(r, allocate=vlan)
		subnet: string @lsm(r, allocate=p2p)
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "vlan=\(parameter.vlan) subnet=\(parameter.subnet)\n"
	}
}

services: vm: #VM
`
}

// TestServiceAllocation: a create gets the lowest free values of the
// pools in its candidate set, the model deploys with them, and they stay
// through the lifecycle; a create on an exhausted pool is a 409 naming
// the pool, and writes nothing; GET /lsm/v1/pools counts what is held;
// deleting an instance frees its values once it is terminated, and the
// next create gets them.
func TestServiceAllocation(t *testing.T) {
	c, srv := startServer(t)
	env := newEnv(t, c, "lsmalloc", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmAllocModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	create := func(name string) lsmReply {
		return lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": name}})
	}
	r := create("web")
	if r.status != http.StatusCreated {
		t.Fatalf("create web: %d %s", r.status, r.body)
	}
	if web := r.instance(t); web.Candidate["vlan"] != 100.0 || web.Candidate["subnet"] != "10.0.0.0/30" {
		t.Errorf("web's candidate set: %v", web.Candidate)
	}
	web := waitState(t, c, env, "web", "up", "rejected", "failed")
	if web.Active["vlan"] != 100.0 || web.Active["subnet"] != "10.0.0.0/30" {
		t.Errorf("web up: %+v", web)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "vlan=100 subnet=10.0.0.0/30\n" {
		t.Errorf("web.conf = %q", got)
	}
	// A client may not choose the value.
	r = lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "own", "vlan": 101}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/vlan", "read-only") {
		t.Errorf("a create that sets vlan: %d %s", r.status, r.body)
	}
	if r = create("db"); r.status != http.StatusCreated {
		t.Fatalf("create db: %d %s", r.status, r.body)
	}
	db := waitState(t, c, env, "db", "up", "rejected", "failed")
	if db.Active["vlan"] != 101.0 || db.Active["subnet"] != "10.0.0.4/30" {
		t.Errorf("db up: %+v", db)
	}
	// Both pools are exhausted: a third create is refused, naming the
	// first pool it finds so (by name), and nothing is written.
	r = create("ftp")
	if p := r.problem(t); r.status != http.StatusConflict || !strings.Contains(p.Detail, "pool p2p (cidr 10.0.0.0/29 by /30) is exhausted") {
		t.Errorf("create on exhausted pools: %d %s", r.status, r.body)
	}
	var inst client.ServiceInstance
	if err := lsmGet(t, c, env, inventory+"/ftp", &inst); err == nil {
		t.Errorf("the refused create is in the inventory: %+v", inst)
	}
	var pools client.List[client.Pool]
	if err := lsmGet(t, c, env, "/lsm/v1/pools", &pools); err != nil || len(pools.Items) != 2 ||
		pools.Items[1].Name != "vlan" || pools.Items[1].Used != 2 || pools.Items[1].Free != 0 || pools.Items[0].Values != 2 {
		t.Fatalf("pools: %+v, %v", pools, err)
	}
	var vlan client.PoolView
	if err := lsmGet(t, c, env, "/lsm/v1/pools/vlan?limit=1", &vlan); err != nil || len(vlan.Allocations) != 1 ||
		vlan.Allocations[0].Value != 100.0 || vlan.Allocations[0].InstanceID != web.ID || vlan.Next != "100" {
		t.Errorf("pool vlan, first page: %+v, %v", vlan, err)
	}
	var rest client.PoolView
	if err := lsmGet(t, c, env, "/lsm/v1/pools/vlan?after=100", &rest); err != nil || len(rest.Allocations) != 1 ||
		rest.Allocations[0].Value != 101.0 || rest.Next != "" {
		t.Errorf("pool vlan after 100: %+v, %v", rest, err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/pools/nosuch", &rest); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("no such pool: %v", err)
	}

	// Deleting web frees its values when it is terminated; the next
	// create gets them.
	r = lsmDo(t, c, env, http.MethodDelete, inventory+"/web?current_version="+strconv.FormatInt(web.Version, 10), "", nil)
	if r.status != 200 {
		t.Fatalf("delete web: %d %s", r.status, r.body)
	}
	waitState(t, c, env, web.ID, "terminated", "delete_failed")
	if err := lsmGet(t, c, env, "/lsm/v1/pools", &pools); err != nil || pools.Items[1].Used != 1 || pools.Items[1].Free != 1 {
		t.Fatalf("pools after web's termination: %+v, %v", pools, err)
	}
	if r = create("ftp"); r.status != http.StatusCreated {
		t.Fatalf("create ftp: %d %s", r.status, r.body)
	}
	ftp := waitState(t, c, env, "ftp", "up", "rejected", "failed")
	if ftp.Active["vlan"] != 100.0 || ftp.Active["subnet"] != "10.0.0.0/30" {
		t.Errorf("ftp up: %+v", ftp)
	}
	if got, _ := readFile(t, filepath.Join(root, "ftp.conf")); got != "vlan=100 subnet=10.0.0.0/30\n" {
		t.Errorf("ftp.conf = %q", got)
	}
	// The model may not take a held value away.
	shrunk := strings.Replace(lsmAllocModel(root), "to: 101}", "to: 100}", 1)
	if err := uploadModel(t, c, env, shrunk); err == nil || !strings.Contains(err.Error(), "pool vlan is now vlan 100–100") {
		t.Errorf("a pool shrunk below a held value: %v", err)
	}
	replayInstance(t, srv, names.ServiceInstanceWorkflowID(env, "vm", ftp.ID))
	replayInstance(t, srv, names.ServiceInstanceWorkflowID(env, "vm", web.ID))
}
