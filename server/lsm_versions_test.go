package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// lsmVersionsModel is a model of the entity vm at version 2 (its memory
// renamed ram, at most 32), or only version 1 (name and memory, at most
// 99) when v2 is false; prev says what previous holds at version 2.
// Each version refines into a file under root that says which version
// made it.
func lsmVersionsModel(root string, v2 bool, prev string) string {
	m := `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VMV1: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:   =~"^[a-z]+$" @lsm(rw)
		memory: *2 | int & >=1 & <=99 @lsm(rw+)
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "memory=\(parameter.memory)\n"
	}
}

#VMV2: lsm.#Entity & {
	version:   2
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		ram:  *2 | int & >=1 & <=32 @lsm(rw+)
		// computed by the model
		label: "\(name)-\(ram)" @lsm(r)
	}
	migrate: {
		from: _
		to: {name: from.name, ram: from.memory}
	}
	output: conf: fs.#File & {
		path:    "` + root + `/\(parameter.name).conf"
		content: "ram=\(parameter.ram)\nversion=2\n"
	}
}
`
	if !v2 {
		return m + "services: vm: #VMV1\n"
	}
	return m + "services: vm: #VMV2" + prev + "\n"
}

// TestEntityVersions drives entity versions end to end by REST: a
// breaking change refused in place and when it drops a used version, then
// accepted as version 2 while version 1's instances stay up as version 1;
// creates of the latest and of an older version, each rendered with its
// own; a migration that reaches up with the mapped attributes and version
// 2's resources; one version 2's validation refuses, leaving the instance
// on version 1 with the errors in its log; and the refusals of bad
// inputs.
func TestEntityVersions(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmversions", nil)
	root := t.TempDir()
	const inventory = "/lsm/v1/service_inventory/vm"
	if err := uploadModel(t, c, env, lsmVersionsModel(root, false, "")); err != nil {
		t.Fatal(err)
	}
	for _, vm := range []struct {
		name   string
		memory int
	}{{"alpha", 2}, {"big", 50}} {
		r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": vm.name, "memory": vm.memory}})
		if r.status != http.StatusCreated || r.instance(t).EntityVersion != 1 {
			t.Fatalf("create %s: %d %s", vm.name, r.status, r.body)
		}
	}
	waitState(t, c, env, "alpha", "up", "rejected", "failed")
	waitState(t, c, env, "big", "up", "rejected", "failed")

	// Version 1 changed in place (memory renamed): refused, naming the
	// instances and saying to make it a new version.
	inPlace := strings.Replace(lsmVersionsModel(root, false, ""), "memory: *2", "mem: *2", 1)
	inPlace = strings.Replace(inPlace, "memory=\\(parameter.memory)", "memory=\\(parameter.mem)", 1)
	err := uploadModel(t, c, env, inPlace)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "new version") {
		t.Fatalf("version 1 broken in place: %v", err)
	}
	// Version 2 without version 1, which live instances use: refused.
	err = uploadModel(t, c, env, lsmVersionsModel(root, true, ""))
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "version 1 was removed") {
		t.Fatalf("version 1 dropped: %v", err)
	}
	// Version 2 keeping version 1: accepted.
	if err := uploadModel(t, c, env, lsmVersionsModel(root, true, " & {previous: [#VMV1]}")); err != nil {
		t.Fatalf("version 2 with version 1 kept: %v", err)
	}
	var cat struct {
		Name          string `json:"name"`
		Version       int    `json:"version"`
		LatestVersion int    `json:"latest_version"`
		Versions      []struct {
			Version   int            `json:"version"`
			Latest    bool           `json:"latest"`
			Instances map[string]int `json:"instances"`
		} `json:"versions"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &cat); err != nil || cat.LatestVersion != 2 || cat.Version != 2 ||
		len(cat.Versions) != 2 || cat.Versions[0].Version != 1 || cat.Versions[0].Latest || !cat.Versions[1].Latest ||
		cat.Versions[0].Instances["up"] != 2 {
		t.Fatalf("catalog: %+v, %v", cat, err)
	}
	var v1 struct {
		Version    int `json:"version"`
		Attributes []struct {
			Name string `json:"name"`
		} `json:"attributes"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm/versions/1", &v1); err != nil || v1.Version != 1 ||
		len(v1.Attributes) != 2 || v1.Attributes[1].Name != "memory" {
		t.Fatalf("version 1: %+v, %v", v1, err)
	}

	// Creates: the latest by default, version 1 when named; each
	// rendered with its own version.
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "newer", "ram": 4}})
	if r.status != http.StatusCreated || r.instance(t).EntityVersion != 2 {
		t.Fatalf("create of the latest: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"service_entity_version": 1,
		"attributes": map[string]any{"name": "older", "memory": 3}})
	if r.status != http.StatusCreated || r.instance(t).EntityVersion != 1 {
		t.Fatalf("create of version 1: %d %s", r.status, r.body)
	}
	newer := waitState(t, c, env, "newer", "up", "rejected", "failed")
	older := waitState(t, c, env, "older", "up", "rejected", "failed")
	if newer.EntityVersion != 2 || newer.Active["label"] != "newer-4" || older.EntityVersion != 1 || older.Active["memory"] != 3.0 {
		t.Errorf("created: %+v / %+v", newer, older)
	}
	if got, _ := readFile(t, filepath.Join(root, "newer.conf")); got != "ram=4\nversion=2\n" {
		t.Errorf("newer.conf = %q", got)
	}
	if got, _ := readFile(t, filepath.Join(root, "older.conf")); got != "memory=3\n" {
		t.Errorf("older.conf = %q", got)
	}

	// A dry-run of older is validated and rendered as version 1.
	r = lsmDo(t, c, env, http.MethodPost, inventory+"/older/dryrun", "", map[string]any{"attributes": map[string]any{"memory": 5}})
	var d instanceDryrun
	if err := json.Unmarshal(r.body, &d); r.status != http.StatusOK || err != nil || !d.Validation.OK || d.DesiredState == nil ||
		len(d.DesiredState.Modified) != 1 || d.DesiredState.Modified[0].Changes["content"].To != "memory=5\n" {
		t.Errorf("dry-run of older: %d %s", r.status, r.body)
	}

	// Bad inputs.
	for _, bad := range []struct {
		reason, method, path string
		body                 any
		status               int
		field                string
	}{
		{"a version the catalog does not have", http.MethodPost, inventory,
			map[string]any{"service_entity_version": 7, "attributes": map[string]any{"name": "x"}}, 422, "/service_entity_version"},
		{"a version that is no number", http.MethodPost, inventory,
			map[string]any{"service_entity_version": "two", "attributes": map[string]any{"name": "x"}}, 422, "/service_entity_version"},
		{"a migration to an unknown version", http.MethodPost, inventory + "/alpha/migrate", map[string]any{"to_version": 9}, 422, "/to_version"},
		{"a migration to the instance's own version", http.MethodPost, inventory + "/alpha/migrate", map[string]any{"to_version": 1}, 422, "/to_version"},
		{"a migration to an older version", http.MethodPost, inventory + "/newer/migrate", map[string]any{"to_version": 1}, 422, "/to_version"},
		{"a to_version that is no number", http.MethodPost, inventory + "/alpha/migrate", map[string]any{"to_version": "2"}, 422, "/to_version"},
		{"an unknown field", http.MethodPost, inventory + "/alpha/migrate", map[string]any{"version": 2}, 422, "/version"},
		{"a stale current_version", http.MethodPost, inventory + "/alpha/migrate", map[string]any{"to_version": 2, "current_version": 1}, 409, "/current_version"},
		{"an unknown instance", http.MethodPost, inventory + "/nobody/migrate", map[string]any{"to_version": 2}, 404, ""},
	} {
		r := lsmDo(t, c, env, bad.method, bad.path, "", bad.body)
		if r.status != bad.status {
			t.Errorf("%s: %d %s, want %d", bad.reason, r.status, r.body, bad.status)
			continue
		}
		if p := r.problem(t); bad.field != "" && !hasFieldError(p, bad.field, "") {
			t.Errorf("%s: %s names no %s", bad.reason, r.body, bad.field)
		}
	}
	var vp struct{}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm/versions/9", &vp); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("version 9: %v", err)
	}
	for _, v := range []string{"two", "0", "-1"} {
		r := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/service_catalog/vm/versions/"+v, "", nil)
		if r.status != 422 || !hasFieldError(r.problem(t), "version", "") {
			t.Errorf("version %q: %d %s, want 422 naming the version", v, r.status, r.body)
		}
	}

	// Migrate alpha: validated as version 2, up with the mapped
	// attributes and version 2's file; version 1's set is the rollback.
	r = lsmDo(t, c, env, http.MethodPost, inventory+"/alpha/migrate", "migrate-alpha", map[string]any{"to_version": 2})
	if r.status != http.StatusOK || r.instance(t).State != "update_start" || r.instance(t).CandidateVersion != 2 {
		t.Fatalf("migrate alpha: %d %s", r.status, r.body)
	}
	alpha := waitState(t, c, env, "alpha", "up", "update_rejected", "update_failed", "failed")
	if alpha.EntityVersion != 2 || alpha.ActiveVersion != 2 || alpha.Active["ram"] != 2.0 || alpha.Active["label"] != "alpha-2" ||
		alpha.Active["memory"] != nil || alpha.RollbackVersion != 1 || alpha.Rollback["memory"] != 2.0 {
		t.Errorf("alpha after the migration: %+v", alpha)
	}
	if got, _ := readFile(t, filepath.Join(root, "alpha.conf")); got != "ram=2\nversion=2\n" {
		t.Errorf("alpha.conf = %q", got)
	}

	// Migrate big: its 50 GiB are beyond version 2's 32. The validation
	// refuses it; big stays up on version 1 with its attributes and
	// file, and the log says why.
	r = lsmDo(t, c, env, http.MethodPost, inventory+"/big/migrate", "", map[string]any{})
	if r.status != http.StatusOK {
		t.Fatalf("migrate big: %d %s", r.status, r.body)
	}
	var log struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	// big's versions: create (4), then update_start, update_rejected
	// and up again.
	wait.For(t, "big's log to reach up after 7 entries", 90*time.Second, func() error {
		err := lsmGet(t, c, env, inventory+"/big/log", &log)
		return wait.Unless(err == nil && len(log.Items) >= 7 && log.Items[0].State == "up", "%+v, %v", log.Items, err)
	})
	bigInst := waitState(t, c, env, "big", "up", "failed")
	if bigInst.EntityVersion != 1 || bigInst.Active["memory"] != 50.0 || bigInst.Candidate != nil {
		t.Errorf("big after the refused migration: %+v", bigInst)
	}
	rejected := false
	for _, e := range log.Items {
		if e.State == "update_rejected" && strings.Contains(string(e.Errors), "ram") {
			rejected = true
		}
	}
	if !rejected {
		t.Errorf("big's log has no rejected validation naming ram: %+v", log.Items)
	}
	if got, _ := readFile(t, filepath.Join(root, "big.conf")); got != "memory=50\n" {
		t.Errorf("big.conf = %q", got)
	}
	// Version 1 cannot go while big and older use it.
	err = uploadModel(t, c, env, lsmVersionsModel(root, true, ""))
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("version 1 dropped while used: %v", err)
	}
}

// TestEntityVersionsBulkMigrate migrates every instance of version 1 at
// once: one order of migrate items, followed by GET; the instances version
// 2 accepts are up on it with their files rebuilt, the one it refuses
// stays on version 1 and its item says why; the refusals of bad inputs.
func TestEntityVersionsBulkMigrate(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmbulk", nil)
	root := t.TempDir()
	const inventory = "/lsm/v1/service_inventory/vm"
	if err := uploadModel(t, c, env, lsmVersionsModel(root, false, "")); err != nil {
		t.Fatal(err)
	}
	memory := map[string]int{"ann": 2, "bob": 3, "cat": 4, "dan": 60}
	for _, name := range []string{"ann", "bob", "cat", "dan"} {
		r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": name, "memory": memory[name]}})
		if r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	for name := range memory {
		waitState(t, c, env, name, "up", "rejected", "failed")
	}
	if err := uploadModel(t, c, env, lsmVersionsModel(root, true, " & {previous: [#VMV1]}")); err != nil {
		t.Fatal(err)
	}
	const migrate = "/lsm/v1/service_catalog/vm/migrate"
	for _, bad := range []struct {
		reason string
		body   any
		field  string
	}{
		{"no from_version", map[string]any{"to_version": 2}, "/from_version"},
		{"an unknown from_version", map[string]any{"from_version": 5, "to_version": 2}, "/from_version"},
		{"a from_version that is no number", map[string]any{"from_version": "1"}, "/from_version"},
		{"an unknown to_version", map[string]any{"from_version": 1, "to_version": 3}, "/to_version"},
		{"a to_version not newer", map[string]any{"from_version": 2, "to_version": 2}, "/to_version"},
		{"a to_version that is no number", map[string]any{"from_version": 1, "to_version": 2.5}, "/to_version"},
		{"an unknown field", map[string]any{"from_version": 1, "all": true}, "/all"},
	} {
		r := lsmDo(t, c, env, http.MethodPost, migrate, "", bad.body)
		if r.status != 422 || !hasFieldError(r.problem(t), bad.field, "") {
			t.Errorf("%s: %d %s, want 422 naming %s", bad.reason, r.status, r.body, bad.field)
		}
	}
	// Nothing was stored: no order.
	var none struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/orders", &none); err != nil || len(none.Items) != 0 {
		t.Errorf("orders after the refused migrations: %d, %v", len(none.Items), err)
	}

	r := lsmDo(t, c, env, http.MethodPost, migrate, "bulk-1", map[string]any{"from_version": 1, "to_version": 2})
	if r.status != http.StatusCreated {
		t.Fatalf("bulk migration: %d %s", r.status, r.body)
	}
	var order client.Order
	if err := json.Unmarshal(r.body, &order); err != nil || order.ItemCount != 4 || order.Policy != "best_effort" {
		t.Fatalf("bulk migration: %s, %v", r.body, err)
	}
	// A repeat under the key: the same order, nothing more started.
	if again := lsmDo(t, c, env, http.MethodPost, migrate, "bulk-1", map[string]any{"from_version": 1, "to_version": 2}); again.status != http.StatusCreated ||
		!strings.Contains(string(again.body), order.ID) {
		t.Errorf("repeated bulk migration: %d %s", again.status, again.body)
	}
	wait.For(t, "the migration order to finish", 2*time.Minute, func() error {
		if err := lsmGet(t, c, env, "/lsm/v1/orders/"+order.ID, &order); err != nil {
			t.Fatal(err)
		}
		return wait.Unless(order.FinishedAt != nil, "%+v", order)
	})
	if order.Status != "partially_failed" || order.Counts["succeeded"] != 3 || order.Counts["failed"] != 1 {
		t.Errorf("migration order: %+v", order)
	}
	for _, it := range order.Items {
		var inst client.ServiceInstance
		if err := lsmGet(t, c, env, inventory+"/"+it.InstanceID, &inst); err != nil {
			t.Fatal(err)
		}
		name := inst.Identity
		if it.Operation != "migrate" || it.ID != name {
			t.Errorf("item %s: operation %q", it.ID, it.Operation)
		}
		if name == "dan" {
			if it.Status != "failed" || !strings.Contains(it.Error, "update_rejected") || inst.EntityVersion != 1 || inst.Active["memory"] != 60.0 {
				t.Errorf("dan (60 > 32): item %+v, instance %+v", it, inst)
			}
			continue
		}
		if it.Status != "succeeded" || inst.EntityVersion != 2 || inst.Active["ram"] != float64(memory[name]) {
			t.Errorf("%s: item %+v, instance %+v", name, it, inst)
		}
		if got, _ := readFile(t, filepath.Join(root, name+".conf")); got != "ram="+strconv.Itoa(memory[name])+"\nversion=2\n" {
			t.Errorf("%s.conf = %q", name, got)
		}
	}
	// An order's update of dan, still of version 1: checked and
	// validated as version 1.
	r = lsmDo(t, c, env, http.MethodPost, "/lsm/v1/orders", "", map[string]any{"policy": "best_effort", "items": []map[string]any{
		{"id": "dan-memory", "operation": "update", "service_entity": "vm", "instance": "dan", "attributes": map[string]any{"memory": 10}}}})
	if r.status != http.StatusCreated {
		t.Fatalf("order of an update of dan: %d %s", r.status, r.body)
	}
	var upd client.Order
	if err := json.Unmarshal(r.body, &upd); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the order of an update of dan to finish", time.Minute, func() error {
		if err := lsmGet(t, c, env, "/lsm/v1/orders/"+upd.ID, &upd); err != nil {
			t.Fatalf("order of an update of dan: %+v, %v", upd, err)
		}
		return wait.Unless(upd.FinishedAt != nil, "%+v", upd)
	})
	if upd.Status != "succeeded" {
		t.Errorf("order of an update of dan: %+v", upd)
	}
	if got, _ := readFile(t, filepath.Join(root, "dan.conf")); got != "memory=10\n" {
		t.Errorf("dan.conf = %q", got)
	}

	var cat struct {
		Versions []struct {
			Version   int            `json:"version"`
			Instances map[string]int `json:"instances"`
		} `json:"versions"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &cat); err != nil || len(cat.Versions) != 2 ||
		cat.Versions[0].Instances["up"] != 1 || cat.Versions[1].Instances["up"] != 3 {
		t.Errorf("catalog after the migration: %+v, %v", cat, err)
	}
}
