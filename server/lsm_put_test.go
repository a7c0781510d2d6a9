package server_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/client"
)

// lsmPutModel is a vm with an rw name, an rw+ memory with a default, an
// optional rw+ note, an r label the model computes, and the simple
// lifecycle with acknowledged as an initial state too.
func lsmPutModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

services: vm: lsm.#Entity & {
	lifecycle: lsm.simple & {initial_states: ["acknowledged"]}
	identity:  "name"
	parameter: {
		name:   =~"^[a-z]+$" @lsm(rw)
		memory: *2 | int & >=1 & <=99 @lsm(rw+)
		note?:  string @lsm(rw+)
		label:  "\(name)-\(memory)" @lsm(r)
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "memory=\(parameter.memory)\n"
	}
}
`
}

// TestServiceInventoryPut replaces an instance's attributes with PUT: an
// rw+ attribute left out is removed (or gets its default), the r one
// keeps the server's value until the model computes it again, and a
// changed rw attribute or a set r one is refused like a PATCH's.
func TestServiceInventoryPut(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmput", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmPutModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	item := inventory + "/web"
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{
		"attributes": map[string]any{"name": "web", "memory": 5, "note": "big"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	inst := waitState(t, c, env, "web", "up", "rejected", "failed")
	if inst.Active["label"] != "web-5" || inst.Active["note"] != "big" {
		t.Fatalf("up: %+v", inst.Active)
	}

	// Refusals: no current_version, a changed rw, a set r; nothing written.
	for _, c2 := range []struct {
		why   string
		body  map[string]any
		field string
		code  int
	}{
		{"no current_version", map[string]any{"attributes": map[string]any{"name": "web"}}, "/current_version", 422},
		{"no attributes", map[string]any{"current_version": inst.Version}, "/attributes", 422},
		{"a changed rw", map[string]any{"current_version": inst.Version, "attributes": map[string]any{"name": "www"}}, "/attributes/name", 422},
		{"a set r", map[string]any{"current_version": inst.Version, "attributes": map[string]any{"name": "web", "label": "x"}}, "/attributes/label", 422},
		{"stale", map[string]any{"current_version": inst.Version - 1, "attributes": map[string]any{"name": "web"}}, "/current_version", 409},
	} {
		r := lsmDo(t, c, env, http.MethodPut, item, "", c2.body)
		if p := r.problem(t); r.status != c2.code || !hasFieldError(p, c2.field, "") {
			t.Errorf("%s: %d %s", c2.why, r.status, r.body)
		}
	}

	// PUT with the name only: note removed, memory back to its default,
	// label kept (the server's) until the validation computes it again.
	put := map[string]any{"current_version": inst.Version, "attributes": map[string]any{"name": "web"}}
	r = lsmDo(t, c, env, http.MethodPut, item, "put-1", put)
	if r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	got := r.instance(t)
	want := map[string]any{"name": "web", "memory": 2.0, "label": "web-5"}
	if got.State != "update_start" || got.Version != inst.Version+1 || !reflect.DeepEqual(got.Candidate, want) {
		t.Fatalf("put = %s %d %v, want update_start %d %v", got.State, got.Version, got.Candidate, inst.Version+1, want)
	}
	if again := lsmDo(t, c, env, http.MethodPut, item, "put-1", put); again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("repeated put: %d %s", again.status, again.body)
	}
	inst = waitState(t, c, env, "web", "up", "update_rejected", "update_failed")
	if want := map[string]any{"name": "web", "memory": 2.0, "label": "web-2"}; !reflect.DeepEqual(inst.Active, want) {
		t.Errorf("active after the put = %v, want %v", inst.Active, want)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=2\n" {
		t.Errorf("web.conf = %q", got)
	}
}

// TestServiceInstanceMetadata sets, merges, removes and replaces an
// instance's metadata without a transfer (its version, state and log
// stay), refuses bad keys and too much, and writes metadata while
// transfers of the instance run: neither loses the other's write.
func TestServiceInstanceMetadata(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmmeta", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmPutModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	item := inventory + "/web"
	meta := item + "/metadata"
	if r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "web"}}); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	inst := waitState(t, c, env, "web", "up", "rejected", "failed")
	var log client.List[client.InstanceLogEntry]
	logLen := func() int {
		t.Helper()
		if err := lsmGet(t, c, env, item+"/log", &log); err != nil {
			t.Fatal(err)
		}
		return len(log.Items)
	}
	versions := logLen()

	write := func(method string, body map[string]any, want map[string]any) {
		t.Helper()
		r := lsmDo(t, c, env, method, meta, "", map[string]any{"metadata": body})
		if r.status != 200 {
			t.Fatalf("%s metadata: %d %s", method, r.status, r.body)
		}
		for _, got := range []client.ServiceInstance{r.instance(t), waitState(t, c, env, "web", "up")} {
			if !reflect.DeepEqual(got.Metadata, want) {
				t.Errorf("%s metadata: %v, want %v", method, got.Metadata, want)
			}
			if got.Version != inst.Version || got.State != inst.State || !reflect.DeepEqual(got.AttributeSets, inst.AttributeSets) {
				t.Errorf("a metadata write changed the instance: %+v", got)
			}
		}
	}
	write(http.MethodPatch, map[string]any{"owner": "ops", "ticket": map[string]any{"id": 7}},
		map[string]any{"owner": "ops", "ticket": map[string]any{"id": 7.0}})
	write(http.MethodPatch, map[string]any{"ticket": nil, "cost": 1.5}, map[string]any{"owner": "ops", "cost": 1.5})
	write(http.MethodPut, map[string]any{"only": true}, map[string]any{"only": true})
	if n := logLen(); n != versions {
		t.Errorf("the log has %d versions after metadata writes, had %d", n, versions)
	}
	var page struct {
		Items []client.ServiceInstance `json:"items"`
	}
	if err := lsmGet(t, c, env, inventory, &page); err != nil || len(page.Items) != 1 || page.Items[0].Metadata["only"] != true {
		t.Errorf("inventory: %+v, %v", page.Items, err)
	}

	// Refusals.
	for _, c2 := range []struct {
		why   string
		body  map[string]any
		field string
	}{
		{"no metadata", map[string]any{}, "/metadata"},
		{"an empty key", map[string]any{"metadata": map[string]any{"": 1}}, "/metadata/"},
		{"a control character", map[string]any{"metadata": map[string]any{"a\tb": 1}}, "/metadata/a\tb"},
		{"a long key", map[string]any{"metadata": map[string]any{strings.Repeat("k", 129): 1}}, "/metadata/" + strings.Repeat("k", 129)},
		{"too much", map[string]any{"metadata": map[string]any{"big": strings.Repeat("x", 16<<10)}}, "/metadata"},
	} {
		r := lsmDo(t, c, env, http.MethodPatch, meta, "", c2.body)
		if p := r.problem(t); r.status != 422 || !hasFieldError(p, c2.field, "") {
			t.Errorf("%s: %d %s", c2.why, r.status, r.body)
		}
	}
	if r := lsmDo(t, c, env, http.MethodPatch, inventory+"/nobody/metadata", "", map[string]any{"metadata": map[string]any{"a": 1}}); r.status != 404 {
		t.Errorf("no such instance: %d %s", r.status, r.body)
	}

	// Metadata writes while an update's transfers run: every key stays,
	// and the update reaches up with its attributes.
	r := lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": inst.Version, "attributes": map[string]any{"memory": 3}})
	if r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	const n = 30
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := lsmTry(c, env, http.MethodPatch, meta, "", map[string]any{"metadata": map[string]any{fmt.Sprint("k", i): i}})
			if err != nil || r.status != 200 {
				t.Errorf("metadata k%d: %v %d %s", i, err, r.status, r.body)
			}
		})
	}
	wg.Wait()
	inst = waitState(t, c, env, "web", "up", "update_rejected", "update_failed")
	if inst.Active["memory"] != 3.0 || len(inst.Metadata) != n+1 {
		t.Errorf("after the update and %d metadata writes: active %v, metadata %v", n, inst.Active, inst.Metadata)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=3\n" {
		t.Errorf("web.conf = %q", got)
	}
}

// TestServiceInstanceInitialState creates an instance in an initial state
// its lifecycle allows (it carries on from there) and refuses one it
// does not allow, naming the states it does.
func TestServiceInstanceInitialState(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsminit", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmPutModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	var entity client.EntityDefinition
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &entity); err != nil ||
		!reflect.DeepEqual(entity.Lifecycle.InitialStates, []string{"acknowledged"}) {
		t.Fatalf("catalog: %+v, %v", entity.Lifecycle, err)
	}
	for _, state := range []string{"up", "terminated", "nowhere"} {
		r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{
			"attributes": map[string]any{"name": "db"}, "initial_state": state})
		if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/initial_state", `"`+state+`"`) ||
			!hasFieldError(p, "/initial_state", `allowed: "start"`) || !hasFieldError(p, "/initial_state", `allowed: "acknowledged"`) {
			t.Errorf("create in %s: %d %s", state, r.status, r.body)
		}
	}
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{
		"attributes": map[string]any{"name": "web"}, "initial_state": "acknowledged"})
	if r.status != http.StatusCreated {
		t.Fatalf("create in acknowledged: %d %s", r.status, r.body)
	}
	if got := r.instance(t); got.State != "acknowledged" || got.Version != 1 || got.Candidate["name"] != "web" {
		t.Errorf("created = %+v", got)
	}
	waitState(t, c, env, "web", "up", "failed")
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=2\n" {
		t.Errorf("web.conf = %q", got)
	}
	var log client.List[client.InstanceLogEntry]
	if err := lsmGet(t, c, env, inventory+"/web/log", &log); err != nil {
		t.Fatal(err)
	}
	if first := log.Items[len(log.Items)-1]; first.State != "acknowledged" || !strings.Contains(string(first.Event), `"create"`) {
		t.Errorf("first log entry = %s %s", first.State, first.Event)
	}
}
