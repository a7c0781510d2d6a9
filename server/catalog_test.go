package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/store"
)

const catalogModel = `package main

import "intend.dev/std/lsm"

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		// The VM's name.
		name: =~"^[a-z]+$" @lsm(rw)
		// Memory in GiB.
		memory: *2 | int & >=1 @lsm(rw+)
	}
	output: {}
}

services: vm: #VM
`

// uploadModel archives a project with main.cue and PUTs it as the model
// source.
func uploadModel(t *testing.T, c *client.Client, env, mainCUE string) error {
	t.Helper()
	return c.Do(context.Background(), http.MethodPut, client.EnvPath(env, "model"),
		client.Raw{ContentType: "application/gzip", Body: modelArchive(t, mainCUE).Archive}, nil)
}

// releaseModel uploads main.cue's project as the model source and
// releases a version built from it (with no resources of the model's
// own, as intend export -d of a model of service entities alone): the
// source becomes the live instances' model.
func releaseModel(t *testing.T, c *client.Client, env, mainCUE string) error {
	t.Helper()
	ctx := context.Background()
	packed := modelArchive(t, mainCUE)
	if err := c.Do(ctx, http.MethodPut, client.EnvPath(env, "model"),
		client.Raw{ContentType: "application/gzip", Body: packed.Archive}, nil); err != nil {
		return err
	}
	var v client.VersionInfo
	if err := c.Do(ctx, http.MethodPut, client.EnvPath(env, "versions")+"?model_source="+packed.Hash,
		[]byte(`{"resources": []}`), &v); err != nil {
		return err
	}
	_, err := c.Release(ctx, env, v.Version)
	return err
}

// modelArchive archives a project with main.cue.
func modelArchive(t *testing.T, mainCUE string) project.Packed {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"intend.yaml": "name: catalog\n", "main.cue": mainCUE} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	return packed
}

// envStore opens the server's database and reads the environment named
// env, for what a test writes behind the API's back.
func envStore(t *testing.T, dbURL, env string) (*store.Store, store.Environment) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	e, err := st.GetEnvironment(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	return st, e
}

// lsmGet is a GET of the /lsm API in env.
func lsmGet(t *testing.T, c *client.Client, env, path string, out any) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if env != "" {
		req.Header.Set(api.EnvironmentHeader, env)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var p client.Problem
		json.NewDecoder(resp.Body).Decode(&p)
		return &p
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// TestServiceCatalog: uploading the model registers its service entities;
// GET /lsm/v1/service_catalog shows them; a model that would break a live
// instance is refused, naming it, and changes nothing.
func TestServiceCatalog(t *testing.T) {
	c, _, dbURL := startServerDB(t)
	env := newEnv(t, c, "catalog", nil)
	ctx := context.Background()
	if err := uploadModel(t, c, env, catalogModel); err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Items []client.ServiceEntity `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog", &cat); err != nil || len(cat.Items) != 1 || cat.Items[0].Name != "vm" {
		t.Fatalf("catalog: %+v, %v", cat, err)
	}
	var vm client.ServiceEntity
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Identity != "name" || vm.Lifecycle.Start != lsm.Simple().Start || len(vm.Attributes) != 2 ||
		vm.Attributes[1].Modifier != string(lsm.ReadWriteAlways) || vm.Attributes[0].Description != "The VM's name." ||
		!strings.Contains(string(vm.Attributes[1].Schema), `"integer"`) {
		t.Errorf("vm = %+v", vm)
	}
	var p *client.Problem
	if err := lsmGet(t, c, "", "/lsm/v1/service_catalog", nil); !errors.As(err, &p) || p.Status != 400 ||
		!strings.Contains(p.Detail, api.EnvironmentHeader) {
		t.Errorf("without the header: %v", err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/nope", nil); !errors.As(err, &p) || p.Status != 404 {
		t.Errorf("unknown entity: %v", err)
	}

	// A live instance; then a model without the entity is refused.
	st, e := envStore(t, dbURL, env)
	const id = "0b1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "up",
		Identity: "web", Sets: lsm.Sets{Active: map[string]any{"name": "web", "memory": 2.0}}}); err != nil {
		t.Fatal(err)
	}
	var before client.ModelSource
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &before); err != nil {
		t.Fatal(err)
	}
	err := uploadModel(t, c, env, "package main\n")
	if !errors.As(err, &p) || p.Status != 409 || !strings.Contains(p.Detail, id) || !strings.Contains(p.Detail, "vm") {
		t.Fatalf("a model dropping a live entity: %v", err)
	}
	var after client.ModelSource
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &after); err != nil || after.Hash != before.Hash {
		t.Errorf("the refused model was stored: %s → %s, %v", before.Hash, after.Hash, err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &vm); err != nil || vm.Instances["up"] != 1 {
		t.Errorf("after the refusal: %+v, %v", vm.Instances, err)
	}
	// A model that does not compile is refused too.
	err = uploadModel(t, c, env, "package main\nresources: x: 1 & 2\n")
	if !errors.As(err, &p) || p.Status != 422 || !strings.Contains(p.Detail, "does not compile") {
		t.Errorf("a broken model: %v", err)
	}
}

// TestServiceInventoryReads: the inventory's read endpoints over instances
// written as the lifecycle engine writes them.
func TestServiceInventoryReads(t *testing.T) {
	c, _, dbURL := startServerDB(t)
	env := newEnv(t, c, "inventory", nil)
	ctx := context.Background()
	if err := uploadModel(t, c, env, catalogModel); err != nil {
		t.Fatal(err)
	}
	st, e := envStore(t, dbURL, env)
	ids := []string{"1b1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", "2b1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", "3b1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"}
	for i, id := range ids {
		name := []string{"alpha", "beta", "gamma"}[i]
		sets := lsm.Sets{Candidate: map[string]any{"name": name, "memory": 2.0}}
		if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "start",
			Identity: name, Sets: sets, Event: json.RawMessage(`{"trigger": "create"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// gamma fails its validation.
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: ids[2], Version: 2, State: "rejected",
		Identity: "gamma", Sets: lsm.Sets{Candidate: map[string]any{"name": "gamma", "memory": 2.0}},
		Event:  json.RawMessage(`{"trigger": "auto", "source": "start", "target": "acknowledged", "error": true}`),
		Errors: json.RawMessage(`[{"path": "output.x", "message": "boom"}]`)}); err != nil {
		t.Fatal(err)
	}

	var page struct {
		Items []client.ServiceInstance `json:"items"`
		Next  string                   `json:"next"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm?limit=2", &page); err != nil || len(page.Items) != 2 || page.Next != ids[1] {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm?after="+page.Next, &page); err != nil || len(page.Items) != 1 || page.Items[0].ID != ids[2] {
		t.Errorf("second page: %+v, %v", page, err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm?state=rejected", &page); err != nil || len(page.Items) != 1 {
		t.Errorf("by state: %+v, %v", page, err)
	}
	var inst client.ServiceInstance
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/beta", &inst); err != nil || inst.ID != ids[1] || inst.Candidate["name"] != "beta" {
		t.Errorf("by identity: %+v, %v", inst, err)
	}
	var p *client.Problem
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/nobody", nil); !errors.As(err, &p) || p.Status != 404 {
		t.Errorf("unknown instance: %v", err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/nothing", nil); !errors.As(err, &p) || p.Status != 404 {
		t.Errorf("unknown entity: %v", err)
	}
	var log struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/"+ids[2]+"/log", &log); err != nil || len(log.Items) != 2 ||
		log.Items[0].State != "rejected" || log.Items[1].Version != 1 {
		t.Errorf("log: %+v, %v", log, err)
	}
	var diag struct {
		State      string `json:"state"`
		Validation *struct {
			Version int64           `json:"version"`
			Errors  json.RawMessage `json:"errors"`
		} `json:"validation"`
		Resources []any `json:"resources"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/gamma/diagnose", &diag); err != nil || diag.Validation == nil ||
		diag.Validation.Version != 2 || !strings.Contains(string(diag.Validation.Errors), "boom") || diag.Resources == nil {
		t.Errorf("diagnose: %+v, %v", diag, err)
	}
	var res struct {
		Items []client.ResourceState `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/alpha/resources", &res); err != nil || res.Items == nil || len(res.Items) != 0 {
		t.Errorf("resources of an instance not exported yet: %+v, %v", res, err)
	}
	// Once its set is exported, its resources show with their state.
	path := filepath.Join(t.TempDir(), "alpha.conf")
	partial := `{"resources": [{"id": "fs::File[localhost,path=` + path + `]", "resource_set": "vm/` + ids[0] + `",
		"attributes": {"path": "` + path + `", "content": "alpha\n"}}]}`
	var v client.VersionInfo
	if err := c.Do(ctx, http.MethodPut, client.EnvPath(env, "versions", "partial"), []byte(partial), &v); err != nil {
		t.Fatal(err)
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/alpha/resources", &res); err != nil || len(res.Items) != 1 ||
		res.Items[0].ResourceID != "fs::File[localhost,path="+path+"]" || res.Items[0].LastResult != "new" {
		t.Errorf("resources after the export: %+v, %v", res, err)
	}
}
