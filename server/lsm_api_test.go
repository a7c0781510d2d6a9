package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/server/servertest"
)

// lsmFileModel is catalogModel whose vm refines into one file under root,
// named after the VM, holding its memory. The file's content admits at
// most two digits: a memory the catalog accepts (>= 1) but the model
// refuses only when an instance is validated.
func lsmFileModel(root string) string {
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		// The VM's name.
		name: =~"^[a-z]+$" @lsm(rw)
		// Memory in GiB.
		memory: *2 | int & >=1 @lsm(rw+)
	}
	output: {
		conf: fs.#File & {
			path:    "` + root + `/\(parameter.name).conf"
			content: "memory=\(parameter.memory)\n" & =~"^memory=[0-9]{1,2}\\n$"
		}
	}
}

services: vm: #VM
`
}

// lsmReply is one response of the /lsm API.
type lsmReply struct {
	status int
	header http.Header
	body   []byte
}

// instance decodes the reply as an instance.
func (r lsmReply) instance(t *testing.T) client.ServiceInstance {
	t.Helper()
	var inst client.ServiceInstance
	if err := json.Unmarshal(r.body, &inst); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	return inst
}

// problem decodes the reply as a problem.
func (r lsmReply) problem(t *testing.T) client.Problem {
	t.Helper()
	var p client.Problem
	if err := json.Unmarshal(r.body, &p); err != nil || p.Type == "" {
		t.Fatalf("not a problem: %d %s", r.status, r.body)
	}
	return p
}

// lsmDo sends a write of the /lsm API in env, with an Idempotency-Key
// when key is not "".
func lsmDo(t *testing.T, c *client.Client, env, method, path, key string, body any) lsmReply {
	t.Helper()
	r, err := lsmTry(c, env, method, path, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// lsmTry is lsmDo returning the transport's error (a server killed
// under the request) instead of failing the test.
func lsmTry(c *client.Client, env, method, path, key string, body any) (lsmReply, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return lsmReply{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return lsmReply{}, err
	}
	req.Header.Set(api.EnvironmentHeader, env)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(api.IdempotencyKeyHeader, key)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return lsmReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return lsmReply{}, err
	}
	return lsmReply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// waitState polls vm ref until it is in state, failing at once in a
// state of fail or after 90 s.
func waitState(t *testing.T, c *client.Client, env, ref, state string, fail ...string) client.ServiceInstance {
	t.Helper()
	return waitEntityState(t, c, env, "vm", ref, state, fail...)
}

func hasFieldError(p client.Problem, field, detail string) bool {
	for _, e := range p.Errors {
		if e.Field == field && strings.Contains(e.Detail, detail) {
			return true
		}
	}
	return false
}

// TestServiceInventoryWrites drives an instance through its lifecycle by
// the REST API only: create, update (v1 and v2), the refusals (stale,
// rw attribute, illegal transfer, identity taken, a key reused for
// another body), an idempotent repeat, a validation failure, and delete;
// the engine deploys and removes the instance's file.
func TestServiceInventoryWrites(t *testing.T) {
	c, srv := startServer(t)
	env := newEnv(t, c, "lsmapi", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "web.conf")
	const inventory = "/lsm/v1/service_inventory/vm"

	// Create, with a key: 201 at the start state.
	create := map[string]any{"attributes": map[string]any{"name": "web", "memory": 2}}
	r := lsmDo(t, c, env, http.MethodPost, inventory, "create-web", create)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	created := r.instance(t)
	if created.Version != 1 || created.State != "start" || created.Identity != "web" || created.Candidate["name"] != "web" {
		t.Fatalf("created = %+v", created)
	}
	id := created.ID
	inst := waitState(t, c, env, id, "up", "rejected", "failed")
	if got, _ := readFile(t, conf); got != "memory=2\n" {
		t.Errorf("web.conf = %q", got)
	}
	if inst.Active["memory"] != 2.0 || inst.Candidate != nil {
		t.Errorf("up: %+v", inst)
	}

	// The same create again under its key: the stored first response,
	// nothing created.
	r = lsmDo(t, c, env, http.MethodPost, inventory, "create-web", create)
	if r.status != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeated create: %d %s", r.status, r.body)
	}
	if again := r.instance(t); again.ID != id || again.Version != 1 || again.State != "start" {
		t.Errorf("repeated create = %+v, want the first response", again)
	}
	var page struct {
		Items []client.ServiceInstance `json:"items"`
	}
	if err := lsmGet(t, c, env, inventory, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("instances after the repeat: %+v, %v", page.Items, err)
	}
	// The key with another body is refused, naming the key.
	r = lsmDo(t, c, env, http.MethodPost, inventory, "create-web",
		map[string]any{"attributes": map[string]any{"name": "db"}})
	if p := r.problem(t); r.status != 422 || !strings.Contains(p.Detail, "create-web") {
		t.Errorf("key reused: %d %s", r.status, r.body)
	}
	// Another VM named web: the identity is taken.
	r = lsmDo(t, c, env, http.MethodPost, inventory, "", create)
	if p := r.problem(t); r.status != 409 || !strings.Contains(p.Detail, "web") {
		t.Errorf("identity taken: %d %s", r.status, r.body)
	}

	// Refusals of an update.
	item := inventory + "/web"
	r = lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"attributes": map[string]any{"memory": 4}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/current_version", "required") {
		t.Errorf("no current_version: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": 1, "attributes": map[string]any{"memory": 4}})
	if p := r.problem(t); r.status != 409 || !hasFieldError(p, "/current_version", strconv.FormatInt(inst.Version, 10)) {
		t.Errorf("stale: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": inst.Version,
		"attributes": map[string]any{"name": "www"}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/name", "cannot change") {
		t.Errorf("rw attribute: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPost, "/lsm/v1/services/vm/web/state", "",
		map[string]any{"current_version": inst.Version, "target_state": "creating"})
	if p := r.problem(t); r.status != 409 || !hasFieldError(p, "/target_state", `"up"`) ||
		!hasFieldError(p, "", "on_update") || !hasFieldError(p, "", "on_delete") {
		t.Errorf("illegal set-state: %d %s", r.status, r.body)
	}
	if err := lsmGet(t, c, env, item, &inst); err != nil || inst.State != "up" {
		t.Fatalf("after the refusals: %+v, %v", inst, err)
	}

	// PATCH v1: memory 4; the old active set goes to rollback. The
	// create's key is sent again: a key is scoped to its endpoint, so on
	// this one it names a new request, and a repeat here replays it.
	patch := map[string]any{"current_version": inst.Version, "attributes": map[string]any{"memory": 4}}
	r = lsmDo(t, c, env, http.MethodPatch, item, "create-web", patch)
	if r.status != 200 || r.instance(t).State != "update_start" || r.instance(t).Version != inst.Version+1 {
		t.Fatalf("patch v1: %d %s", r.status, r.body)
	}
	if again := lsmDo(t, c, env, http.MethodPatch, item, "create-web", patch); again.status != 200 ||
		again.header.Get("Idempotent-Replayed") != "true" || again.instance(t).Version != inst.Version+1 {
		t.Errorf("repeated patch v1: %d %s", again.status, again.body)
	}
	inst = waitState(t, c, env, id, "up", "update_rejected", "update_failed", "failed")
	if got, _ := readFile(t, conf); got != "memory=4\n" {
		t.Errorf("web.conf after v1 = %q", got)
	}
	if inst.Active["memory"] != 4.0 || inst.Rollback["memory"] != 2.0 || inst.Active["name"] != "web" {
		t.Errorf("after v1: %+v", inst)
	}

	// PATCH v2: a replace edit; an edit dictpath refuses names its index.
	r = lsmDo(t, c, env, http.MethodPatch, "/lsm/v2/service_inventory/vm/web", "", map[string]any{
		"current_version": inst.Version,
		"edit":            []map[string]any{{"edit_id": "bad", "operation": "replace", "target": "memory.gib", "value": 8}}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/edit/0/target", "") || !strings.Contains(p.Detail, `"bad"`) {
		t.Errorf("bad edit: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPatch, "/lsm/v2/service_inventory/vm/web", "v2-edit", map[string]any{
		"current_version": inst.Version,
		"edit":            []map[string]any{{"edit_id": "mem", "operation": "replace", "target": "memory", "value": 8}}})
	if r.status != 200 {
		t.Fatalf("patch v2: %d %s", r.status, r.body)
	}
	inst = waitState(t, c, env, id, "up", "update_rejected", "update_failed", "failed")
	if got, _ := readFile(t, conf); got != "memory=8\n" {
		t.Errorf("web.conf after v2 = %q", got)
	}

	// A create the model refuses at validation: rejected, with the
	// errors in the log and the diagnosis.
	r = lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "big", "memory": 100}})
	if r.status != http.StatusCreated {
		t.Fatalf("create big: %d %s", r.status, r.body)
	}
	waitState(t, c, env, "big", "rejected", "acknowledged", "creating", "up")
	var log struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	if err := lsmGet(t, c, env, inventory+"/big/log", &log); err != nil || len(log.Items) != 2 ||
		!strings.Contains(string(log.Items[0].Errors), "memory") {
		t.Errorf("log of big: %+v, %v", log, err)
	}
	var diag struct {
		Validation *struct {
			Errors json.RawMessage `json:"errors"`
		} `json:"validation"`
	}
	if err := lsmGet(t, c, env, inventory+"/big/diagnose", &diag); err != nil || diag.Validation == nil ||
		len(diag.Validation.Errors) == 0 {
		t.Errorf("diagnose big: %+v, %v", diag, err)
	}
	if _, err := os.Stat(filepath.Join(root, "big.conf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("big.conf: %v", err)
	}

	// DELETE: terminated, the file removed, listed as deleted.
	r = lsmDo(t, c, env, http.MethodDelete, item+"?current_version="+strconv.FormatInt(inst.Version, 10), "", nil)
	if r.status != 200 || r.instance(t).State != "deleting" {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitState(t, c, env, id, "terminated", "delete_failed")
	if _, err := os.Stat(conf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("web.conf after the delete: %v", err)
	}
	if err := lsmGet(t, c, env, inventory+"?deleted=true", &page); err != nil || len(page.Items) != 1 || page.Items[0].ID != id {
		t.Errorf("deleted instances: %+v, %v", page.Items, err)
	}
	r = lsmDo(t, c, env, http.MethodDelete, inventory+"/"+id+"?current_version=99", "", nil)
	if r.status != 409 {
		t.Errorf("delete of a terminated instance: %d %s", r.status, r.body)
	}
	// The whole life replays with the current code.
	replayInstance(t, srv, names.ServiceInstanceWorkflowID(env, "vm", id))
}

// TestServiceInventoryFailedDeploy: an update whose deploy fails is
// rolled back (the previous attributes active again, the failed ones kept
// as the candidate set), a rollback whose deploy fails too leaves the
// instance failed, with the failed resource in its diagnosis; once the
// cause is gone, the api transfer failed → creating deploys the
// instance again and it is up with the attributes from before the update.
func TestServiceInventoryFailedDeploy(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmfail", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "web.conf")
	const inventory = "/lsm/v1/service_inventory/vm"
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "web", "memory": 2}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	inst := waitState(t, c, env, "web", "up", "rejected", "failed")

	// A directory where the file goes: every write of it fails (a
	// permanent error, no retries).
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	r = lsmDo(t, c, env, http.MethodPatch, inventory+"/web", "", map[string]any{"current_version": inst.Version,
		"attributes": map[string]any{"memory": 4}})
	if r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	inst = waitState(t, c, env, "web", "failed", "up")
	if inst.Active["memory"] != 2.0 || inst.Candidate["memory"] != 4.0 || inst.Rollback != nil {
		t.Errorf("after the rollback: active %v, candidate %v, rollback %v; want memory 2 active again and 4 the candidate",
			inst.Active, inst.Candidate, inst.Rollback)
	}
	var log struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	if err := lsmGet(t, c, env, inventory+"/web/log", &log); err != nil {
		t.Fatal(err)
	}
	var path []string
	for i := len(log.Items) - 1; i >= 0; i-- {
		path = append(path, log.Items[i].State)
	}
	if want := "start acknowledged creating up update_start update_acknowledged updating update_failed rolling_back failed"; strings.Join(path, " ") != want {
		t.Errorf("log states %v, want %s", path, want)
	}
	// Who asked is in the log: the client's creates and updates carry the
	// token, intend's own transfers no one.
	var actors []string
	for i := len(log.Items) - 1; i >= 0; i-- {
		var ev struct{ Actor string }
		if err := json.Unmarshal(log.Items[i].Event, &ev); err != nil {
			t.Fatal(err)
		}
		actors = append(actors, ev.Actor)
	}
	if got, want := strings.Join(actors, ","), "token:bootstrap,,,,token:bootstrap,,,,,"; got != want {
		t.Errorf("log actors %s, want %s (the create and the update by the client, the rest by intend)", got, want)
	}
	var diag struct {
		Resources []struct {
			ID    string  `json:"id"`
			Error *string `json:"error"`
		} `json:"resources"`
	}
	if err := lsmGet(t, c, env, inventory+"/web/diagnose", &diag); err != nil || len(diag.Resources) != 1 ||
		!strings.Contains(diag.Resources[0].ID, "web.conf") || diag.Resources[0].Error == nil ||
		!strings.Contains(*diag.Resources[0].Error, "is a directory") {
		t.Errorf("diagnose: %+v, %v", diag, err)
	}

	// The cause removed, the api transfer retries the deploy.
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	r = lsmDo(t, c, env, http.MethodPost, "/lsm/v1/services/vm/web/state", "", map[string]any{
		"current_version": inst.Version, "target_state": "creating"})
	if r.status != 200 || r.instance(t).State != "creating" {
		t.Fatalf("set-state creating: %d %s", r.status, r.body)
	}
	inst = waitState(t, c, env, "web", "up", "failed")
	if got, _ := readFile(t, conf); got != "memory=2\n" {
		t.Errorf("web.conf after the retry = %q, want the attributes from before the update", got)
	}
	if inst.Active["memory"] != 2.0 {
		t.Errorf("up with %v", inst.Active)
	}
}

// TestServiceInventoryModelChange: releasing a version built from a
// changed model makes the live instances export their resources again,
// built by it, without a request and without a transfer (the instance
// stays up at its version). A release whose source was never announced
// (the server died in between) is announced by the reconciler.
func TestServiceInventoryModelChange(t *testing.T) {
	c, _, db := startServerDB(t)
	env := newEnv(t, c, "lsmmodel", nil)
	root := t.TempDir()
	model := lsmFileModel(root)
	if err := uploadModel(t, c, env, model); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "web", "memory": 3}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")
	conf := filepath.Join(root, "web.conf")

	changed := strings.Replace(model, `"memory=\(parameter.memory)\n" & =~"^memory=[0-9]{1,2}\\n$"`, `"mem=\(parameter.memory)\n"`, 1)
	if changed == model {
		t.Fatal("the model was not changed")
	}
	if err := releaseModel(t, c, env, changed); err != nil {
		t.Fatal(err)
	}
	waitContent(t, conf, "mem=3\n")
	var inst client.ServiceInstance
	if err := lsmGet(t, c, env, inventory+"/web", &inst); err != nil || inst.State != "up" || inst.Version != up.Version {
		t.Errorf("after the new model: %+v, %v; want up at version %d", inst, err, up.Version)
	}

	// Released, not announced: as if the server died right after the
	// release's commit.
	st, e := envStore(t, db, env)
	ctx := context.Background()
	packed := modelArchive(t, strings.Replace(changed, `"mem=`, `"m=`, 1))
	if m, err := st.PutModelSource(ctx, e.ID, packed.Hash, packed.Archive, packed.Files, "cli"); err != nil || m.AnnouncedAt != nil {
		t.Fatalf("store the third model: %+v, %v", m, err)
	}
	v, err := st.ExportVersionOf(ctx, e.ID, intent.Version{}, packed.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := st.ReleaseVersion(ctx, e.ID, v.Version); err != nil || rel.Model != packed.Hash {
		t.Fatalf("release the third model: %+v, %v", rel, err)
	}
	waitContent(t, conf, "m=3\n")
}

// TestFullExportKeepsInstances: with an instance up, a full export of the
// model as intend export compiles it (without the inventory: here, no
// plain resources at all), released and deployed, keeps the instance's
// resources in the desired state: its file stays deployed, the instance
// stays up. Before, the export dropped them (issue 14, A.1).
func TestFullExportKeepsInstances(t *testing.T) {
	c, _, _ := startServerDB(t)
	ctx := context.Background()
	env := newEnv(t, c, "lsmfull", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 3}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")
	// The instance body carries its deployment's progress.
	var view struct {
		Deployment client.Deployment `json:"deployment"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/web", &view); err != nil ||
		view.Deployment != (client.Deployment{Total: 1, Deployed: 1}) {
		t.Errorf("deployment of the instance up = %+v, %v; want 1 of 1 deployed", view.Deployment, err)
	}

	v, err := c.ExportVersion(ctx, env, []byte(`{"resources": []}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.ResourceCount != 1 || v.KeptInstanceResources != 1 {
		t.Errorf("full export = %+v, want the instance's one resource kept", v)
	}
	rel, err := c.Release(ctx, env, v.Version)
	if err != nil || rel.Request == nil {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if _, err := c.WaitRequest(ctx, env, rel.Request.ID, 60*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=3\n" {
		t.Errorf("web.conf after the full export = %q", got)
	}
	items, _, err := c.Resources(ctx, env, map[string][]string{"compliance": {"compliant"}})
	if err != nil || len(items) != 1 {
		t.Errorf("compliant resources after the full export: %d (%v), want the instance's", len(items), err)
	}
	var inst client.ServiceInstance
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/web", &inst); err != nil || inst.State != "up" ||
		inst.Version != up.Version {
		t.Errorf("the instance after the full export: %+v, %v", inst, err)
	}
}

// TestRollbackToAVersion: POST .../rollback {"to_version": n} restores the
// attributes the instance had at version n as an update, through
// validation and deploy (issue 14, B.2); bad requests are refused naming
// the field, and a state that takes no update refuses it with 409.
func TestRollbackToAVersion(t *testing.T) {
	c, _, _ := startServerDB(t)
	env := newEnv(t, c, "lsmrollback", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const item = "/lsm/v1/service_inventory/vm/web"
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 3}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	first := waitState(t, c, env, "web", "up", "rejected", "failed")
	if r := lsmDo(t, c, env, http.MethodPatch, item, "", map[string]any{"current_version": first.Version,
		"attributes": map[string]any{"memory": 5}}); r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	second := waitState(t, c, env, "web", "up", "update_rejected", "update_failed")
	conf := filepath.Join(root, "web.conf")
	if got, _ := readFile(t, conf); got != "memory=5\n" {
		t.Fatalf("web.conf after the update = %q", got)
	}

	for _, tc := range []struct {
		body  map[string]any
		code  int
		field string
	}{
		{map[string]any{"current_version": second.Version}, 422, "/to_version"},
		{map[string]any{"current_version": second.Version, "to_version": second.Version}, 422, "/to_version"},
		{map[string]any{"current_version": second.Version, "to_version": 0}, 422, "/to_version"},
		{map[string]any{"to_version": first.Version}, 422, "/current_version"},
		{map[string]any{"current_version": first.Version, "to_version": 1}, 409, "/current_version"},
		{map[string]any{"current_version": second.Version, "to_version": "four"}, 422, "/to_version"},
		{map[string]any{"current_version": second.Version, "to_version": 1, "attributes": map[string]any{}}, 422, "/attributes"},
	} {
		r := lsmDo(t, c, env, http.MethodPost, item+"/rollback", "", tc.body)
		if p := r.problem(t); r.status != tc.code || !hasFieldError(p, tc.field, "") {
			t.Errorf("rollback %v: %d %s, want %d naming %s", tc.body, r.status, r.body, tc.code, tc.field)
		}
	}
	req, err := http.NewRequest(http.MethodPost, c.Base+item+"/rollback", strings.NewReader(`{"to_version": `))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.EnvironmentHeader, env)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(servertest.Authorize(req))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("a rollback of malformed JSON: %d %s, want a 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The refusals wrote nothing.
	var still client.ServiceInstance
	if err := lsmGet(t, c, env, item, &still); err != nil || still.Version != second.Version {
		t.Errorf("after the refused rollbacks: %+v, %v; want version %d", still, err, second.Version)
	}

	r := lsmDo(t, c, env, http.MethodPost, item+"/rollback", "", map[string]any{"current_version": second.Version,
		"to_version": first.Version})
	if r.status != http.StatusOK {
		t.Fatalf("rollback to version %d: %d %s", first.Version, r.status, r.body)
	}
	back := waitState(t, c, env, "web", "up", "update_rejected", "update_failed")
	if back.Version <= second.Version || back.Active["memory"] != 3.0 {
		t.Errorf("after the rollback: %+v, want up with memory 3 at a newer version", back)
	}
	waitContent(t, conf, "memory=3\n")
}
