package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
)

// autoswitchModel is lsmFileModel with simple's two create-time auto
// transfers named: start → acknowledged (validates) is auto_validate,
// acknowledged → creating is auto_creating.
func autoswitchModel(t *testing.T, root string) string {
	t.Helper()
	m := strings.Replace(lsmFileModel(root), "lifecycle: lsm.simple", `lifecycle: lsm.simple & {
		transfers: [{config_name: "auto_validate"}, {}, {}, {config_name: "auto_creating"}, ...]
	}`, 1)
	if m == lsmFileModel(root) {
		t.Fatal("lsmFileModel has no lifecycle: lsm.simple")
	}
	return m
}

// instanceConfig reads the instance config of vm ref.
func instanceConfig(t *testing.T, c *client.Client, env, ref string) client.InstanceConfig {
	t.Helper()
	var ic client.InstanceConfig
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/"+ref+"/config", &ic); err != nil {
		t.Fatal(err)
	}
	return ic
}

// TestAutoTransferConfigNames: an entity's lifecycle names its two
// create-time auto transfers. The entity turns auto_creating off: new
// instances take auto_validate by themselves and wait in acknowledged.
// One instance's config turns auto_creating back on: that instance goes
// on to up, the other keeps waiting (its workflow was told nothing), and
// a set-state to creating takes its held auto transfer. The instance
// config route is read for readers, refused to them for writes, refuses
// names the lifecycle lacks, and shows the effective switches.
func TestAutoTransferConfigNames(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmnames", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, autoswitchModel(t, root)); err != nil {
		t.Fatal(err)
	}
	var ent client.ServiceEntity
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &ent); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ent.Lifecycle); !strings.Contains(string(b), `"config_name":"auto_creating"`) {
		t.Fatalf("the catalog's lifecycle lacks the config name: %s", b)
	}
	op := as(c, mint(t, c, "names-operator", "operator", env))
	reader := as(c, mint(t, c, "names-reader", "read", env))
	const config = "/lsm/v1/service_catalog/vm/config"
	for _, bad := range []struct{ why, body, field string }{
		{"a name no transfer has", `{"auto_transfer_configs": {"auto_deleting": false}}`, "/auto_transfer_configs/auto_deleting"},
		{"a name that is not a name", `{"auto_transfer_configs": {"a b": false}}`, "/auto_transfer_configs/a b"},
		{"a string for the bool", `{"auto_transfer_configs": {"auto_creating": "off"}}`, "/auto_transfer_configs/auto_creating"},
	} {
		r := lsmRaw(t, op, op.Token, env, http.MethodPatch, config, bad.body)
		if p := r.problem(t); r.status != 422 || !hasFieldError(p, bad.field, "") {
			t.Errorf("%s: %d %s", bad.why, r.status, r.body)
		}
	}
	r := lsmDo(t, op, env, http.MethodPatch, config, "", map[string]any{"auto_transfer_configs": map[string]any{"auto_creating": false}})
	if r.status != 200 || !strings.Contains(string(r.body), `"auto_transfer_configs":{"auto_creating":false}`) ||
		!strings.Contains(string(r.body), `"auto_transfers":true`) {
		t.Fatalf("auto_creating off: %d %s", r.status, r.body)
	}

	const inventory = "/lsm/v1/service_inventory/vm"
	for _, name := range []string{"web", "db"} {
		if r := lsmDo(t, op, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": name}}); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	// auto_validate is still the engine's: both reach acknowledged (version
	// 2) by themselves, and wait there.
	for _, name := range []string{"web", "db"} {
		if inst := waitState(t, c, env, name, "acknowledged", "rejected", "creating", "up"); inst.Version != 2 {
			t.Fatalf("%s waits at %+v", name, inst)
		}
	}
	ic := instanceConfig(t, reader, env, "db")
	if !ic.AutoTransfers || len(ic.AutoTransferConfigs) != 0 || !ic.Effective.AutoTransfers ||
		ic.Effective.AutoTransferConfigs["auto_creating"] || !ic.Effective.AutoTransferConfigs["auto_validate"] {
		t.Errorf("db's config = %+v", ic)
	}
	// A held instance lists the held auto transfer as the set-state that
	// takes it.
	if r := lsmDo(t, op, env, http.MethodPost, "/lsm/v1/services/vm/db/state", "",
		map[string]any{"current_version": 2, "target_state": "up"}); r.status != 409 ||
		!hasFieldError(r.problem(t), "", `target_state "creating"`) {
		t.Errorf("set-state to up: %d %s", r.status, r.body)
	}

	const webConfig = inventory + "/web/config"
	if r := lsmDo(t, reader, env, http.MethodPatch, webConfig, "", map[string]any{"auto_transfer_configs": map[string]any{"auto_creating": true}}); r.status != 403 {
		t.Errorf("a reader's instance config: %d %s", r.status, r.body)
	}
	for _, bad := range []struct{ why, body, field string }{
		{"nothing to set", `{}`, "/auto_transfers"},
		{"an unknown field", `{"auto": true}`, "/auto"},
		{"a name no transfer has", `{"auto_transfer_configs": {"nope": true}}`, "/auto_transfer_configs/nope"},
	} {
		r := lsmRaw(t, op, op.Token, env, http.MethodPatch, webConfig, bad.body)
		if p := r.problem(t); r.status != 422 || !hasFieldError(p, bad.field, "") {
			t.Errorf("instance config, %s: %d %s", bad.why, r.status, r.body)
		}
	}
	if r := lsmRaw(t, op, op.Token, env, http.MethodPatch, inventory+"/nobody/config", `{"auto_transfers": true}`); r.status != 404 {
		t.Errorf("an unknown instance: %d %s", r.status, r.body)
	}
	r = lsmDo(t, op, env, http.MethodPatch, webConfig, "", map[string]any{"auto_transfer_configs": map[string]any{"auto_creating": true}})
	if r.status != 200 {
		t.Fatalf("web's auto_creating on: %d %s", r.status, r.body)
	}
	var got client.InstanceConfig
	if err := json.Unmarshal(r.body, &got); err != nil || !got.AutoTransferConfigs["auto_creating"] || !got.Effective.AutoTransferConfigs["auto_creating"] {
		t.Errorf("web's config = %s, %v", r.body, err)
	}
	web := waitState(t, c, env, "web", "up", "failed")
	if web.Version != 4 {
		t.Errorf("web went on: %+v", web)
	}
	if got, _ := readFile(t, filepath.Join(root, "web.conf")); got != "memory=2\n" {
		t.Errorf("web.conf = %q", got)
	}
	// db's workflow was told nothing: it is where it was, and an
	// operator's set-state takes its held auto transfer (logged as auto).
	r = lsmDo(t, op, env, http.MethodPost, "/lsm/v1/services/vm/db/state", "",
		map[string]any{"current_version": 2, "target_state": "creating"})
	if r.status != 200 {
		t.Fatalf("db's set-state to creating: %d %s", r.status, r.body)
	}
	entry, ev := lastLog(t, c, env, "db")
	if entry.Version != 3 || ev["trigger"] != "auto" || ev["source"] != "acknowledged" {
		t.Errorf("db's hand-taken auto transfer's log = %+v %v", entry, ev)
	}
	waitState(t, c, env, "db", "up", "failed")

	// The instance's own wide switch holds what its names let go; null
	// removes a name's entry (the entity's counts again).
	r = lsmDo(t, op, env, http.MethodPatch, webConfig, "", map[string]any{"auto_transfers": false,
		"auto_transfer_configs": map[string]any{"auto_creating": nil}})
	got = client.InstanceConfig{}
	if err := json.Unmarshal(r.body, &got); r.status != 200 || err != nil || got.AutoTransfers || len(got.AutoTransferConfigs) != 0 ||
		got.Effective.AutoTransfers || got.Effective.AutoTransferConfigs["auto_validate"] {
		t.Errorf("web's wide switch off: %d %s", r.status, r.body)
	}
	if ic := instanceConfig(t, c, env, "web"); ic.AutoTransfers || ic.Effective.AutoTransferConfigs["auto_creating"] {
		t.Errorf("web's config read back = %+v", ic)
	}
	// The changes are in the audit trail, with what they set.
	var trail client.List[client.AuditEntry]
	if err := c.Do(t.Context(), http.MethodGet, "/api/v1/audit?action=lsm.instance.configure", nil, &trail); err != nil {
		t.Fatal(err)
	}
	var done []string
	for _, e := range trail.Items {
		if e.Status == http.StatusOK {
			done = append(done, string(e.Detail))
		}
	}
	if len(done) != 2 || !strings.Contains(done[1], `"auto_creating":true`) || !strings.Contains(done[0], `"auto_transfers":false`) {
		t.Errorf("the audit trail of instance configs (newest first) = %q", done)
	}
}

// TestInstanceConfigAfterTemporalLosesItsStore: an instance's own config
// is PostgreSQL's: Temporal comes back empty, the reconciler restarts the
// instance's workflow with it, and the instance, its auto transfers held
// by its own config, waits in update_start after an update until an
// operator's set-state takes the held transfer.
func TestInstanceConfigAfterTemporalLosesItsStore(t *testing.T) {
	addr, namespace, file, stop, start := ownTemporal(t)
	c, _, _ := startValidated(t, server.Config{TemporalAddress: addr, TemporalNamespace: namespace,
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second, InstanceReconcileEvery: time.Second})
	env := newEnv(t, c, "lsmnameslost", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, autoswitchModel(t, root)); err != nil {
		t.Fatal(err)
	}
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web"}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")
	if r := lsmDo(t, c, env, http.MethodPatch, "/lsm/v1/service_inventory/vm/web/config", "",
		map[string]any{"auto_transfers": false}); r.status != 200 {
		t.Fatalf("web's auto transfers off: %d %s", r.status, r.body)
	}

	stop()
	for _, f := range []string{file, file + "-wal", file + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	start()

	wait.For(t, "the update to be taken", 90*time.Second, func() error {
		r := lsmDo(t, c, env, http.MethodPatch, "/lsm/v1/service_inventory/vm/web", "", map[string]any{"current_version": up.Version,
			"attributes": map[string]any{"memory": 5}})
		if r.status != http.StatusOK && r.status != http.StatusServiceUnavailable {
			t.Fatalf("update after Temporal lost its store: %d %s", r.status, r.body)
		}
		return wait.Unless(r.status == http.StatusOK, "update after Temporal lost its store: %d %s", r.status, r.body)
	})
	// Held: the set-state at the update's version is the transfer the
	// engine would have taken (unheld, it has moved on by then: 409).
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/services/vm/web/state", "",
		map[string]any{"current_version": up.Version + 1, "target_state": "update_acknowledged"})
	if r.status != 200 {
		t.Fatalf("set-state to update_acknowledged: %d %s", r.status, r.body)
	}
	if inst := r.instance(t); inst.State != "update_acknowledged" || inst.Version != up.Version+2 {
		t.Errorf("after the set-state: %+v", inst)
	}
}
