package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// catalogConfig reads the entity vm's config.
func catalogConfig(t *testing.T, c *client.Client, env string) client.EntityConfig {
	t.Helper()
	var e client.ServiceEntity
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &e); err != nil {
		t.Fatal(err)
	}
	return e.Config
}

// lastLog is the newest entry of the instance's log.
func lastLog(t *testing.T, c *client.Client, env, ref string) (client.InstanceLogEntry, map[string]any) {
	t.Helper()
	var log struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/"+ref+"/log?limit=1", &log); err != nil || len(log.Items) != 1 {
		t.Fatalf("log of %s: %+v, %v", ref, log, err)
	}
	var ev map[string]any
	if err := json.Unmarshal(log.Items[0].Event, &ev); err != nil {
		t.Fatal(err)
	}
	return log.Items[0], ev
}

// TestAutoTransfersOff: an operator turns the entity's auto transfers off
// (refused to a reader, and for bad bodies, changing nothing); the config
// survives a model upload; a create then stays in start until an operator
// takes start → acknowledged with a set-state (validated, logged as auto
// with the operator as actor), and waits again in acknowledged; an update
// waits likewise; turning auto transfers back on takes the waiting
// instance on to up by itself.
func TestAutoTransfersOff(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmauto", nil)
	root := t.TempDir()
	model := lsmFileModel(root)
	if err := uploadModel(t, c, env, model); err != nil {
		t.Fatal(err)
	}
	const config = "/lsm/v1/service_catalog/vm/config"
	if cfg := catalogConfig(t, c, env); !cfg.AutoTransfers {
		t.Fatalf("default config = %+v", cfg)
	}
	op := as(c, mint(t, c, "auto-operator", "operator", env))
	reader := as(c, mint(t, c, "auto-reader", "read", env))
	if r := lsmDo(t, reader, env, http.MethodPatch, config, "", map[string]any{"auto_transfers": false}); r.status != 403 {
		t.Errorf("a reader's config: %d %s", r.status, r.body)
	}
	for _, bad := range []struct{ why, body, field string }{
		{"malformed JSON", `{"auto_transfers": fal`, ""},
		{"an unknown field", `{"auto_transfers": false, "auto": false}`, "/auto"},
		{"a string for the bool", `{"auto_transfers": "no"}`, "/auto_transfers"},
		{"nothing to set", `{}`, "/auto_transfers"},
		{"null", `{"auto_transfers": null}`, "/auto_transfers"},
	} {
		r := lsmRaw(t, op, op.Token, env, http.MethodPatch, config, bad.body)
		if p := r.problem(t); r.status < 400 || r.status >= 500 || (bad.field != "" && !hasFieldError(p, bad.field, "")) {
			t.Errorf("%s: %d %s", bad.why, r.status, r.body)
		}
	}
	if r := lsmRaw(t, op, op.Token, env, http.MethodPatch, "/lsm/v1/service_catalog/nope/config", `{"auto_transfers": false}`); r.status != 404 {
		t.Errorf("an unknown entity: %d %s", r.status, r.body)
	}
	if cfg := catalogConfig(t, c, env); !cfg.AutoTransfers {
		t.Fatalf("the refusals changed the config: %+v", cfg)
	}
	r := lsmDo(t, op, env, http.MethodPatch, config, "", map[string]any{"auto_transfers": false})
	if r.status != 200 || !strings.Contains(string(r.body), `"auto_transfers":false`) {
		t.Fatalf("config off: %d %s", r.status, r.body)
	}
	// A model upload rewrites the entity; the config stays.
	if err := uploadModel(t, c, env, model+"\n// again\n"); err != nil {
		t.Fatal(err)
	}
	if cfg := catalogConfig(t, c, env); cfg.AutoTransfers {
		t.Fatalf("the config after a model upload = %+v", cfg)
	}

	// A create waits in start: the operator's set-state at version 1 is
	// the transfer the engine would have taken (with auto transfers on,
	// the engine has moved the instance on by then: 409).
	const inventory = "/lsm/v1/service_inventory/vm"
	r = lsmDo(t, op, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "web"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	state := func(version int64, target string) client.ServiceInstance {
		t.Helper()
		r := lsmDo(t, op, env, http.MethodPost, "/lsm/v1/services/vm/web/state", "",
			map[string]any{"current_version": version, "target_state": target})
		if r.status != 200 {
			t.Fatalf("set-state %d → %s: %d %s", version, target, r.status, r.body)
		}
		return r.instance(t)
	}
	if inst := state(1, "acknowledged"); inst.State != "acknowledged" || inst.Version != 2 {
		t.Fatalf("start → acknowledged by hand: %+v", inst)
	}
	entry, ev := lastLog(t, c, env, "web")
	if entry.Version != 2 || ev["trigger"] != "auto" || ev["source"] != "start" || !strings.HasPrefix(ev["actor"].(string), "token:auto-operator") {
		t.Errorf("the hand-taken auto transfer's log = %+v %v", entry, ev)
	}
	// A set-state to a state no transfer of acknowledged reaches is still
	// refused, naming the held auto transfer as the set-state it takes,
	// and the instance waits in acknowledged.
	if r := lsmDo(t, op, env, http.MethodPost, "/lsm/v1/services/vm/web/state", "",
		map[string]any{"current_version": 2, "target_state": "up"}); r.status != 409 ||
		!hasFieldError(r.problem(t), "", `target_state "creating"`) {
		t.Errorf("set-state to up: %d %s", r.status, r.body)
	}
	if inst := state(2, "creating"); inst.State != "creating" || inst.Active["name"] != "web" {
		t.Fatalf("acknowledged → creating by hand: %+v", inst)
	}
	inst := waitState(t, c, env, "web", "up", "failed") // the resource transfer is not auto
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=2\n" {
		t.Errorf("web.conf = %q", got)
	}

	// An update waits in update_start, then in update_acknowledged; auto
	// transfers back on take it on to up.
	r = lsmDo(t, op, env, http.MethodPatch, inventory+"/web", "", map[string]any{"current_version": inst.Version,
		"attributes": map[string]any{"memory": 5}})
	if r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	acked := state(inst.Version+1, "update_acknowledged")
	if acked.State != "update_acknowledged" {
		t.Fatalf("update_start → update_acknowledged: %+v", acked)
	}
	r = lsmDo(t, op, env, http.MethodPatch, config, "", map[string]any{"auto_transfers": true})
	if r.status != 200 {
		t.Fatalf("config on: %d %s", r.status, r.body)
	}
	inst = waitState(t, c, env, "web", "up", "update_failed", "failed")
	if inst.Version != acked.Version+2 || inst.Active["memory"] != 5.0 {
		t.Errorf("resumed: %+v (acknowledged at %d)", inst, acked.Version)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=5\n" {
		t.Errorf("web.conf after the update = %q", got)
	}
}

// TestExpertMode: an admin forces a state and sets past the lifecycle,
// logged with trigger expert, the reason and the actor; the instance then
// does what its new state calls for (up exports the forced active set).
// An operator is refused (403); bad bodies are refused, writing nothing.
func TestExpertMode(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmexpert", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "web"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	inst := waitState(t, c, env, "web", "up", "failed")
	const expert = inventory + "/web/expert"
	op := as(c, mint(t, c, "expert-operator", "operator", env))
	if r := lsmDo(t, op, env, http.MethodPost, expert, "",
		map[string]any{"current_version": inst.Version, "state": "failed", "reason": "x"}); r.status != 403 {
		t.Errorf("an operator's expert transfer: %d %s", r.status, r.body)
	}
	v := inst.Version
	for _, bad := range []struct{ why, body, field string }{
		{"malformed JSON", `{"current_version": 1, "state": `, ""},
		{"an unknown field", `{"current_version": V, "state": "up", "reason": "r", "force": true}`, "/force"},
		{"no reason", `{"current_version": V, "state": "up"}`, "/reason"},
		{"an empty reason", `{"current_version": V, "state": "up", "reason": ""}`, "/reason"},
		{"a reason too long", `{"current_version": V, "state": "up", "reason": "` + strings.Repeat("r", 1001) + `"}`, "/reason"},
		{"a reason that is not text", `{"current_version": V, "state": "up", "reason": 5}`, "/reason"},
		{"a state the lifecycle lacks", `{"current_version": V, "state": "nowhere", "reason": "r"}`, "/state"},
		{"a state that is not a string", `{"current_version": V, "state": 1, "reason": "r"}`, "/state"},
		{"an active set that is not an object", `{"current_version": V, "active_attributes": [1], "reason": "r"}`, "/active_attributes"},
		{"a null candidate set", `{"current_version": V, "candidate_attributes": null, "reason": "r"}`, "/candidate_attributes"},
		{"a rollback set that is a string", `{"current_version": V, "rollback_attributes": "x", "reason": "r"}`, "/rollback_attributes"},
		{"nothing to force", `{"current_version": V, "reason": "r"}`, "/state"},
		{"no current_version", `{"state": "up", "reason": "r"}`, "/current_version"},
		{"a stale current_version", `{"current_version": 1, "state": "up", "reason": "r"}`, "/current_version"},
		{"a negative current_version", `{"current_version": -3, "state": "up", "reason": "r"}`, "/current_version"},
	} {
		body := strings.ReplaceAll(bad.body, "V", strconv.FormatInt(v, 10))
		r := lsmRaw(t, c, c.Token, env, http.MethodPost, expert, body)
		if p := r.problem(t); r.status < 400 || r.status >= 500 || (bad.field != "" && !hasFieldError(p, bad.field, "")) {
			t.Errorf("%s: %d %s", bad.why, r.status, r.body)
		}
	}
	if err := lsmGet(t, c, env, inventory+"/web", &inst); err != nil || inst.Version != v {
		t.Fatalf("the refusals wrote: %+v, %v", inst, err)
	}

	// Force up → failed (no transfer goes there from up).
	r = lsmDo(t, c, env, http.MethodPost, expert, "", map[string]any{"current_version": v, "state": "failed",
		"reason": "the VM was found broken by hand"})
	if r.status != 200 || r.instance(t).State != "failed" || r.instance(t).Version != v+1 {
		t.Fatalf("expert to failed: %d %s", r.status, r.body)
	}
	entry, ev := lastLog(t, c, env, "web")
	if entry.State != "failed" || ev["trigger"] != "expert" || ev["source"] != "up" ||
		ev["reason"] != "the VM was found broken by hand" || !strings.HasPrefix(ev["actor"].(string), "token:") {
		t.Errorf("the expert transfer's log = %+v %v", entry, ev)
	}
	// Force back to up with another active set: up exports it.
	r = lsmDo(t, c, env, http.MethodPost, expert, "", map[string]any{"current_version": v + 1, "state": "up",
		"active_attributes": map[string]any{"name": "web", "memory": 7}, "reason": "repaired by hand"})
	if r.status != 200 || r.instance(t).Active["memory"] != 7.0 {
		t.Fatalf("expert to up: %d %s", r.status, r.body)
	}
	waitContent(t, filepath.Join(root, "web.conf"), "memory=7\n")
}
