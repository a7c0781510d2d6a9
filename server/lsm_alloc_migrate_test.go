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

// lsmAllocVersionsModel is a vm entity whose vlan is allocated, and
// (with v2) a version 2 that adds an asn allocated from a pool of one
// value; each version's file says what it has.
func lsmAllocVersionsModel(root string, v2 bool) string {
	m := `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

pools: {
	vlan: lsm.#Pool & {kind: "vlan", from: 100, to: 109}
	asn:  lsm.#Pool & {kind: "range", from: 64512, to: 64512}
}

#VMV1: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		vlan: int @lsm(r, allocate=vlan)
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "vlan=\(parameter.vlan)\n"
	}
}

#VMV2: lsm.#Entity & {
	version:   2
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		vlan: int @lsm(r, allocate=vlan)
		asn:  int @lsm(r, allocate=asn)
	}
	migrate: {
		from: _
		to: {name: from.name}
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "vlan=\(parameter.vlan) asn=\(parameter.asn)\n"
	}
}
`
	if !v2 {
		return m + "services: vm: #VMV1\n"
	}
	return m + "services: vm: #VMV2 & {previous: [#VMV1]}\n"
}

// TestAllocationMigrate: a migration to a version that adds an allocated
// attribute gives the instance a value before the version's validation
// reads it, and keeps the values the instance holds (its vlan, which the
// model's migration does not map); a migration whose pool is exhausted
// is a 409 naming the pool, and leaves the instance and the pools as
// they were; terminating the migrated instance gives both values back.
func TestAllocationMigrate(t *testing.T) {
	c, srv := startServer(t)
	env := newEnv(t, c, "lsmallocmig", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmAllocVersionsModel(root, false)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	for _, name := range []string{"web", "db"} {
		if r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": name}}); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
		waitState(t, c, env, name, "up", "rejected", "failed")
	}
	if err := uploadModel(t, c, env, lsmAllocVersionsModel(root, true)); err != nil {
		t.Fatalf("version 2 that adds an allocated attribute: %v", err)
	}

	r := lsmDo(t, c, env, http.MethodPost, inventory+"/web/migrate", "", map[string]any{"to_version": 2})
	if r.status != http.StatusOK || r.instance(t).Candidate["vlan"] != 100.0 || r.instance(t).Candidate["asn"] != 64512.0 {
		t.Fatalf("migrate web: %d %s", r.status, r.body)
	}
	web := waitState(t, c, env, "web", "up", "update_rejected", "update_failed", "failed")
	if web.ActiveVersion != 2 || web.Active["vlan"] != 100.0 || web.Active["asn"] != 64512.0 {
		t.Errorf("web after the migration: %+v", web)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "vlan=100 asn=64512\n" {
		t.Errorf("web.conf = %q", got)
	}

	// db: the asn pool has no value left. Refused, naming the pool; db
	// stays on version 1 and no value is taken.
	db := waitState(t, c, env, "db", "up")
	r = lsmDo(t, c, env, http.MethodPost, inventory+"/db/migrate", "", map[string]any{"to_version": 2})
	if p := r.problem(t); r.status != http.StatusConflict || !strings.Contains(p.Detail, "pool asn (") || !strings.Contains(p.Detail, "exhausted") {
		t.Fatalf("migrate db with the asn pool exhausted: %d %s", r.status, r.body)
	}
	if now := waitState(t, c, env, "db", "up"); now.Version != db.Version || now.ActiveVersion != 1 || now.Active["vlan"] != 101.0 {
		t.Errorf("db after the refused migration: %+v, was %+v", now, db)
	}
	usage := func() map[string]int {
		t.Helper()
		var pools client.List[client.Pool]
		if err := lsmGet(t, c, env, "/lsm/v1/pools", &pools); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, p := range pools.Items {
			out[p.Name] = int(p.Used)
		}
		return out
	}
	if u := usage(); u["vlan"] != 2 || u["asn"] != 1 {
		t.Errorf("pools after the refused migration: %v, want vlan 2 and asn 1 held", u)
	}

	// Terminating web gives its vlan and its asn back; db's migration
	// then takes the asn, and keeps its own vlan.
	r = lsmDo(t, c, env, http.MethodDelete, inventory+"/web?current_version="+strconv.FormatInt(web.Version, 10), "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("delete web: %d %s", r.status, r.body)
	}
	waitState(t, c, env, web.ID, "terminated", "delete_failed")
	if u := usage(); u["vlan"] != 1 || u["asn"] != 0 {
		t.Errorf("pools after web's termination: %v, want vlan 1 and asn 0 held", u)
	}
	r = lsmDo(t, c, env, http.MethodPost, inventory+"/db/migrate", "", map[string]any{"to_version": 2})
	if r.status != http.StatusOK {
		t.Fatalf("migrate db: %d %s", r.status, r.body)
	}
	db = waitState(t, c, env, "db", "up", "update_rejected", "update_failed", "failed")
	if db.ActiveVersion != 2 || db.Active["vlan"] != 101.0 || db.Active["asn"] != 64512.0 {
		t.Errorf("db after its migration: %+v", db)
	}
	replayInstance(t, srv, names.ServiceInstanceWorkflowID(env, "vm", db.ID))
	replayInstance(t, srv, names.ServiceInstanceWorkflowID(env, "vm", web.ID))
}
