package server_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// lsmEmbeddedModel is a vm with a list of network interfaces, an
// embedded entity: mtu may change, vlan is set once, label is the
// model's. The file holds one line per interface.
func lsmEmbeddedModel(root string) string {
	return `package main

import (
	"strings"

	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#NIC: {
	name:  =~"^eth[0-9]$" @lsm(rw)
	mtu:   *1500 | int & >=576 & <=9000 @lsm(rw+)
	vlan?: int @lsm(rw)
	label: "nic-\(name)" @lsm(r)
}

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		nics: [...#NIC] @lsm(rw+, key=name)
	}
	output: {
		conf: fs.#File & {
			path:    "` + root + `/\(parameter.name).conf"
			content: strings.Join([for n in parameter.nics {"\(n.label) mtu=\(n.mtu)\n"}], "")
		}
	}
}

services: vm: #VM
`
}

// TestEmbeddedEntitiesThroughREST creates an instance with a list of
// embedded entities, updates one element by key (v2 edit), adds one, and
// is refused (422 with the pointer of the value) a change of an rw field
// inside an element and an r field set by a create.
func TestEmbeddedEntitiesThroughREST(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmembedded", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmEmbeddedModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	conf := filepath.Join(root, "web.conf")

	// The catalog shows the embedded entity.
	var ent struct {
		Attributes []client.AttributeSpec `json:"attributes"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &ent); err != nil {
		t.Fatal(err)
	}
	if len(ent.Attributes) != 2 || ent.Attributes[1].Embedded == nil || !ent.Attributes[1].Embedded.List ||
		strings.Join(ent.Attributes[1].Embedded.Key, ",") != "name" || len(ent.Attributes[1].Embedded.Attributes) != 4 {
		t.Fatalf("catalog attributes: %+v", ent.Attributes)
	}

	// A create that sets an element's r field: 422 at its pointer.
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{
		"name": "db", "nics": []any{map[string]any{"name": "eth0"}, map[string]any{"name": "eth1", "label": "mine"}}}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/nics/1/label", "nics[name=eth1].label: read-only") {
		t.Errorf("create with an element's r field: %d %s", r.status, r.body)
	}

	// Create: the candidate set shows the defaults inside the elements;
	// the validated set the model's r values.
	r = lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{
		"name": "web", "nics": []any{map[string]any{"name": "eth0", "vlan": 10}, map[string]any{"name": "eth1", "mtu": 9000}}}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	created := r.instance(t)
	if nics, _ := created.Candidate["nics"].([]any); len(nics) != 2 || nics[0].(map[string]any)["mtu"] != 1500.0 {
		t.Errorf("created candidate: %+v", created.Candidate)
	}
	inst := waitState(t, c, env, created.ID, "up", "rejected", "failed")
	if got, _ := readFile(t, conf); got != "nic-eth0 mtu=1500\nnic-eth1 mtu=9000\n" {
		t.Errorf("web.conf = %q", got)
	}
	if nics, _ := inst.Active["nics"].([]any); len(nics) != 2 || nics[1].(map[string]any)["label"] != "nic-eth1" {
		t.Errorf("active: %+v", inst.Active)
	}

	// An rw field inside an element, by key: refused, at its pointer,
	// named by its dict path.
	const item = "/lsm/v2/service_inventory/vm/web"
	r = lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": inst.Version,
		"edit": []map[string]any{{"operation": "replace", "target": "nics[name=eth0].vlan", "value": 20}}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/nics/0/vlan", "nics[name=eth0].vlan: cannot change after creation (rw") {
		t.Errorf("rw field in an element: %d %s", r.status, r.body)
	}

	// An rw+ field of one element, by key, and a new element: taken.
	r = lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": inst.Version,
		"edit": []map[string]any{
			{"operation": "replace", "target": "nics[name=eth1].mtu", "value": 1400},
			{"operation": "replace", "target": "nics[name=eth2]", "value": map[string]any{"name": "eth2", "vlan": 30}},
		}})
	if r.status != http.StatusOK {
		t.Fatalf("update by key: %d %s", r.status, r.body)
	}
	inst = waitState(t, c, env, created.ID, "up", "update_rejected", "update_failed", "failed")
	if got, _ := readFile(t, conf); got != "nic-eth0 mtu=1500\nnic-eth1 mtu=1400\nnic-eth2 mtu=1500\n" {
		t.Errorf("web.conf after the update = %q", got)
	}
	nics, _ := inst.Active["nics"].([]any)
	if len(nics) != 3 || nics[0].(map[string]any)["vlan"] != 10.0 || nics[2].(map[string]any)["label"] != "nic-eth2" {
		t.Errorf("active after the update: %+v", inst.Active)
	}

	// v1 replaces the list as a whole: an element's rw field changed in
	// it is refused the same way.
	r = lsmDo(t, c, env, http.MethodPatch, inventory+"/web", "", map[string]any{"current_version": inst.Version,
		"attributes": map[string]any{"nics": []any{map[string]any{"name": "eth0", "vlan": 11}}}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/nics/0/vlan", "cannot change") {
		t.Errorf("v1 with an rw field changed: %d %s", r.status, r.body)
	}
}
