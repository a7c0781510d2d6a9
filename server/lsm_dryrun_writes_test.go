package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// lsmPausableModel is lsmFileModel with the simple lifecycle and a state
// "paused" that an operator's set-state reaches from up and that purges
// the instance's resources (and leaves again to creating).
func lsmPausableModel(root string) string {
	return `package main

import (
	"list"
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Pausable: lsm.#Lifecycle & {
	name:  "pausable"
	start: "start"
	states: lsm.simple.states & {
		paused: {model_state: "active", purge: true, description: "switched off: the resources are removed"}
	}
	transfers: list.Concat([lsm.simple.transfers, [
		{source: "up", target: "paused", trigger: "api", description: "switch off"},
		{source: "paused", target: "creating", trigger: "api", description: "switch on again"},
	]])
}

#VM: lsm.#Entity & {
	lifecycle: #Pausable
	identity:  "name"
	parameter: {
		name:   =~"^[a-z]+$" @lsm(rw)
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

// writeDryrun is the answer of a dry-run of any write, as a client reads it.
type writeDryrun struct {
	client.InstanceDryrunReport
	Validation struct {
		OK     bool            `json:"ok"`
		Errors json.RawMessage `json:"errors"`
	} `json:"validation"`
}

// TestDryrunEveryWrite: a create, a delete, a set-state and a rollback
// are dry-run as lsm.Decide judges the write, against a live (up)
// instance: each shows the transfer, the state it leads to and what
// happens to the instance's resources, in the desired state and on the
// target, and changes nothing (the instance's version, state and log,
// the inventory, the desired-state versions and the file are as they
// were). A write the instance would refuse is refused with the write's
// problem.
func TestDryrunEveryWrite(t *testing.T) {
	c, _, _ := startServerDB(t)
	ctx := context.Background()
	env := newEnv(t, c, "lsmdryrunall", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmPausableModel(root)); err != nil {
		t.Fatal(err)
	}
	const item = "/lsm/v1/service_inventory/vm/web"
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 2}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")
	conf := filepath.Join(root, "web.conf")
	waitContent(t, conf, "memory=2\n")
	// An update, so that version 4 or so has another set to roll back to.
	if r := lsmDo(t, c, env, http.MethodPatch, item, "",
		map[string]any{"current_version": up.Version, "attributes": map[string]any{"memory": 3}}); r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	waitContent(t, conf, "memory=3\n")
	up = waitState(t, c, env, "web", "up", "update_failed", "failed")
	before, err := versions(ctx, c, env)
	if err != nil {
		t.Fatal(err)
	}
	type logPage struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	var log0 logPage
	if err := lsmGet(t, c, env, item+"/log", &log0); err != nil {
		t.Fatal(err)
	}
	var inv0 json.RawMessage
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm", &inv0); err != nil {
		t.Fatal(err)
	}
	// The version whose active set had memory 2.
	var rollbackTo int64
	for _, e := range log0.Items {
		if e.State == "up" && e.Active["memory"] == 2.0 {
			rollbackTo = e.Version
		}
	}
	if rollbackTo == 0 {
		t.Fatalf("no version up with memory 2 in the log: %+v", log0.Items)
	}
	unchanged := func(when string) {
		t.Helper()
		var inst client.ServiceInstance
		if err := lsmGet(t, c, env, item, &inst); err != nil || inst.Version != up.Version || inst.State != "up" {
			t.Errorf("%s: instance %+v (%v), want it up at version %d", when, inst, err, up.Version)
		}
		var log logPage
		if err := lsmGet(t, c, env, item+"/log", &log); err != nil || len(log.Items) != len(log0.Items) {
			t.Errorf("%s: %d log entries (%v), want %d: no transfer", when, len(log.Items), err, len(log0.Items))
		}
		var inv json.RawMessage
		if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm", &inv); err != nil || !sameJSONDoc(inv, inv0) {
			t.Errorf("%s: inventory %s (%v), want %s", when, inv, err, inv0)
		}
		after, err := versions(ctx, c, env)
		if err != nil || len(after) != len(before) || after[0].Version != before[0].Version {
			t.Errorf("%s: versions %v (%v), want %v", when, after, err, before)
		}
		if got, _ := readFile(t, conf); got != "memory=3\n" {
			t.Errorf("%s: web.conf = %q, want it untouched", when, got)
		}
	}
	dryrun := func(path string, body any) writeDryrun {
		t.Helper()
		r := lsmDo(t, c, env, http.MethodPost, path+"?wait=60s", "", body)
		if r.status != http.StatusOK {
			t.Fatalf("dry-run %s %v: %d %s", path, body, r.status, r.body)
		}
		var d writeDryrun
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		if d.Dryrun != nil && d.Dryrun.Status != "done" {
			t.Fatalf("dry-run %s %v: run %+v, want it done", path, body, d.Dryrun)
		}
		return d
	}
	transfer := func(d writeDryrun, trigger, source, target, resulting, mode string) {
		t.Helper()
		if tr := d.Transfer; tr == nil || tr.Trigger != trigger || tr.Source != source || tr.Target != target ||
			d.ResultingState != resulting || d.ExportMode != mode {
			t.Errorf("%s: transfer %+v, resulting %q, export %q; want %s %s→%s, resulting %s, export %s",
				d.Operation, d.Transfer, d.ResultingState, d.ExportMode, trigger, source, target, resulting, mode)
		}
	}

	// A delete: on_delete to deleting, which purges: the file would be
	// removed from the target.
	d := dryrun(item+"/dryrun", map[string]any{"operation": "delete", "current_version": up.Version})
	transfer(d, "on_delete", "up", "deleting", "deleting", "purge")
	if ds := d.DesiredState; ds == nil || len(ds.Modified) != 1 || ds.Modified[0].Changes["purged"].To != true {
		t.Errorf("delete: desired state %+v, want the file modified to purged", d.DesiredState)
	}
	if len(d.Targets) != 1 || d.Targets[0].Status != "deleted" {
		t.Errorf("delete: targets %+v, want the file deleted", d.Targets)
	}
	unchanged("after the delete's dry-run")

	// A set-state to paused (an api transfer to a state that purges).
	d = dryrun(item+"/dryrun", map[string]any{"operation": "set_state", "target_state": "paused"})
	transfer(d, "api", "up", "paused", "paused", "purge")
	if len(d.Targets) != 1 || d.Targets[0].Status != "deleted" {
		t.Errorf("set_state paused: targets %+v, want the file deleted", d.Targets)
	}
	unchanged("after the set-state's dry-run")

	// A rollback to the version with memory 2: an update with that set.
	d = dryrun(item+"/dryrun", map[string]any{"operation": "rollback", "to_version": rollbackTo, "current_version": up.Version})
	transfer(d, "on_update", "up", "update_start", "update_start", "export")
	if !d.Validation.OK || d.CandidateAttributes["memory"] != 2.0 {
		t.Errorf("rollback: %+v, want memory 2 validated", d)
	}
	if ds := d.DesiredState; ds == nil || len(ds.Modified) != 1 || ds.Modified[0].Changes["content"].To != "memory=2\n" {
		t.Errorf("rollback: desired state %+v, want the file's content memory=2", d.DesiredState)
	}
	if len(d.Targets) != 1 || d.Targets[0].Status != "modified" || !strings.Contains(string(d.Targets[0].Changes), "memory=2") {
		t.Errorf("rollback: targets %+v, want the file modified to memory=2", d.Targets)
	}
	unchanged("after the rollback's dry-run")

	// An update says so too, and without operation it is the same.
	d = dryrun(item+"/dryrun", map[string]any{"operation": "update", "attributes": map[string]any{"memory": 5}})
	transfer(d, "on_update", "up", "update_start", "update_start", "export")
	if d.Operation != "update" || !d.UpdateAllowed || d.DesiredState == nil || len(d.DesiredState.Modified) != 1 {
		t.Errorf("update: %+v", d)
	}

	// A create: the create's transfer to start, its candidate set with
	// the defaults, a file that would be added.
	d = dryrun("/lsm/v1/service_inventory/vm/dryrun", map[string]any{"attributes": map[string]any{"name": "db"}})
	transfer(d, "create", "", "start", "start", "none")
	if d.Operation != "create" || d.Version != 0 || !d.Validation.OK || d.CandidateAttributes["memory"] != 2.0 {
		t.Errorf("create: %+v, want memory 2 (the default) validated", d)
	}
	if ds := d.DesiredState; ds == nil || len(ds.Added) != 1 || !strings.Contains(ds.Added[0], "db.conf") {
		t.Errorf("create: desired state %+v, want db.conf added", d.DesiredState)
	}
	if len(d.Targets) != 1 || d.Targets[0].Status == "unmodified" {
		t.Errorf("create: targets %+v, want db.conf to be made", d.Targets)
	}
	if _, err := os.Stat(filepath.Join(root, "db.conf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("db.conf exists after a create's dry-run")
	}
	if r := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/service_inventory/vm/db", "", nil); r.status != http.StatusNotFound {
		t.Errorf("GET the created-by-dry-run instance db: %d %s, want 404", r.status, r.body)
	}
	// A value the model refuses fails the validation; nothing is dry-run.
	d = dryrun("/lsm/v1/service_inventory/vm/dryrun", map[string]any{"attributes": map[string]any{"name": "big", "memory": 100}})
	if d.Validation.OK || d.DesiredState != nil || d.Dryrun != nil {
		t.Errorf("create of memory 100: %+v, want a failed validation and no dry-run", d)
	}
	unchanged("after the create's dry-runs")

	// Refusals: the write's own problem, nothing written.
	for _, tc := range []struct {
		path  string
		body  any
		code  int
		field string
	}{
		// Illegal: up has no api transfer to creating (409 naming the target).
		{item + "/dryrun", map[string]any{"operation": "set_state", "target_state": "creating"}, 409, "/target_state"},
		// Stale, for each operation.
		{item + "/dryrun", map[string]any{"operation": "delete", "current_version": up.Version - 1}, 409, "/current_version"},
		{item + "/dryrun", map[string]any{"operation": "set_state", "target_state": "paused", "current_version": up.Version - 1}, 409, "/current_version"},
		{item + "/dryrun", map[string]any{"operation": "rollback", "to_version": rollbackTo, "current_version": up.Version - 1}, 409, "/current_version"},
		// What the operation does not take, or lacks.
		{item + "/dryrun", map[string]any{"operation": "explode"}, 422, "/operation"},
		{item + "/dryrun", map[string]any{"operation": "set_state"}, 422, "/target_state"},
		{item + "/dryrun", map[string]any{"operation": "delete", "attributes": map[string]any{"memory": 3}}, 422, "/attributes"},
		{item + "/dryrun", map[string]any{"operation": "rollback"}, 422, "/to_version"},
		{item + "/dryrun", map[string]any{"operation": "rollback", "to_version": up.Version}, 422, "/to_version"},
		{item + "/dryrun", map[string]any{"operation": "delete", "to_version": 1}, 422, "/to_version"},
		// A create the entity refuses, and one of an id that exists.
		{"/lsm/v1/service_inventory/vm/dryrun", map[string]any{"attributes": map[string]any{"memory": 3}}, 422, "/attributes/name"},
		{"/lsm/v1/service_inventory/vm/dryrun", map[string]any{"service_instance_id": up.ID, "attributes": map[string]any{"name": "web"}}, 409, ""},
		{"/lsm/v1/service_inventory/vm/dryrun", map[string]any{"service_instance_id": "web"}, 422, "/service_instance_id"},
		{"/lsm/v1/service_inventory/nosuch/dryrun", map[string]any{}, 404, ""},
	} {
		r := lsmDo(t, c, env, http.MethodPost, tc.path, "", tc.body)
		if r.status != tc.code {
			t.Errorf("dry-run %s %v: %d %s, want %d", tc.path, tc.body, r.status, r.body, tc.code)
			continue
		}
		if p := r.problem(t); tc.field != "" && !hasFieldError(p, tc.field, "") {
			t.Errorf("dry-run %s %v: %s, want a problem naming %q", tc.path, tc.body, r.body, tc.field)
		}
	}
	// The illegal set-state's problem is the write's, word for word.
	dr := lsmDo(t, c, env, http.MethodPost, item+"/dryrun", "", map[string]any{"operation": "set_state", "target_state": "creating", "current_version": up.Version})
	wr := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/services/vm/web/state", "", map[string]any{"target_state": "creating", "current_version": up.Version})
	if dp, wp := dr.problem(t), wr.problem(t); dr.status != wr.status || dp.Detail != wp.Detail || !reflect.DeepEqual(dp.Errors, wp.Errors) {
		t.Errorf("illegal set-state: dry-run %d %s, write %d %s: want the same problem", dr.status, dr.body, wr.status, wr.body)
	}
	// A reader may not dry-run a create either.
	reader := as(c, mint(t, c, "dryrun-all-reader", "read", env))
	if r := lsmDo(t, reader, env, http.MethodPost, "/lsm/v1/service_inventory/vm/dryrun", "",
		map[string]any{"attributes": map[string]any{"name": "db"}}); r.status != http.StatusForbidden {
		t.Errorf("a reader's create dry-run: %d %s, want 403", r.status, r.body)
	}
	unchanged("after the refusals")
}

// sameJSONDoc reports whether two JSON documents are equal as values.
func sameJSONDoc(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
