package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/exectest"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/server"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

// TestLSMCommands: intend export registers the model's service entities;
// intend lsm shows the catalog and the inventory.
func TestLSMCommands(t *testing.T) {
	// Not parallel: see exectest.StartServer.
	c, _, dbURL := exectest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "lsm")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)
	dir := t.TempDir()
	model := `package main

import "intend.dev/std/lsm"

#VM: lsm.#Entity & {
	lifecycle:   lsm.simple
	identity:    "name"
	description: "A virtual machine."
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
	for name, text := range map[string]string{"intend.yaml": "name: lsm\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, vars, "export", dir)

	out := ok(t, vars, "lsm", "catalog")
	if row := rowOf(t, out, "vm"); row[1] != "simple" || row[2] != "2" {
		t.Errorf("catalog row %v\n%s", row, out)
	}
	out = ok(t, vars, "lsm", "catalog", "vm")
	if row := rowOf(t, out, "memory"); row[1] != "rw+" || row[2] != "no" || row[3] != "2" {
		t.Errorf("memory row %v\n%s", row, out)
	}
	if field(t, out, "identity") != "name" || !strings.Contains(out, "The VM's name.") {
		t.Errorf("catalog vm:\n%s", out)
	}

	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := st.GetEnvironment(context.Background(), envName)
	if err != nil {
		t.Fatal(err)
	}
	const id = "4b1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	if _, err := st.ApplyInstanceChange(context.Background(), e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1,
		State: "start", Identity: "web", Sets: lsm.Sets{Candidate: map[string]any{"name": "web", "memory": 4.0}},
		Event: json.RawMessage(`{"trigger": "create", "target": "start"}`)}); err != nil {
		t.Fatal(err)
	}
	out = ok(t, vars, "lsm", "list", "vm")
	if row := rowOf(t, out, id); row[1] != "web" || row[2] != "start" || row[3] != "1" {
		t.Errorf("list row %v\n%s", row, out)
	}
	out = ok(t, vars, "lsm", "show", "vm", "web")
	if field(t, out, "state") != "start" || !strings.Contains(field(t, out, "candidate"), `"memory":4`) {
		t.Errorf("show:\n%s", out)
	}
	out = ok(t, vars, "lsm", "log", "vm", id)
	if row := rowOf(t, out, "1"); row[1] != "start" {
		t.Errorf("log row %v\n%s", row, out)
	}
	if out = ok(t, vars, "lsm", "diagnose", "vm", "web"); !strings.Contains(out, "nothing failed") {
		t.Errorf("diagnose:\n%s", out)
	}
	fails(t, vars, exitFailed, []string{"Not found (404)"}, "lsm", "show", "vm", "nobody")
	var insts []store.ServiceInstance
	jsonOf(t, ok(t, vars, "lsm", "list", "vm", "--json"), &insts)
	if len(insts) != 1 || insts[0].ID != id {
		t.Errorf("list --json: %+v", insts)
	}
}

// TestLSMWriteCommands drives an instance through the simple lifecycle
// with the CLI alone: create → up, update → up, an illegal set-state,
// delete → terminated.
func TestLSMWriteCommands(t *testing.T) {
	// Not parallel: see exectest.StartServer.
	c, _, _ := exectest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "lsmw")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "vms")
	model := `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:   =~"^[a-z]+$" @lsm(rw)
		memory: *2 | int & >=1 @lsm(rw+)
	}
	output: conf: fs.#File & {path: "` + target + `/\(parameter.name).conf", content: "memory=\(parameter.memory)\n"}
}

services: vm: #VM
`
	for name, text := range map[string]string{"intend.yaml": "name: lsmw\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, vars, "export", dir)

	out := ok(t, vars, "lsm", "create", "vm", "--attr", "name=web", "--idempotency-key", "create-web", "--wait", "up")
	if field(t, out, "state") != "up" {
		t.Fatalf("create --wait up:\n%s", out)
	}
	conf := filepath.Join(target, "web.conf")
	if b, err := os.ReadFile(conf); err != nil || string(b) != "memory=2\n" {
		t.Errorf("deployed %q, %v", b, err)
	}
	// The same request again: the first answer, no second instance.
	ok(t, vars, "lsm", "create", "vm", "--attr", "name=web", "--idempotency-key", "create-web")
	var insts []store.ServiceInstance
	jsonOf(t, ok(t, vars, "lsm", "list", "vm", "--json"), &insts)
	if len(insts) != 1 {
		t.Errorf("%d instances after a repeated create", len(insts))
	}

	out = ok(t, vars, "lsm", "update", "vm", "web", "--attr", "memory=6", "--wait", "up")
	// (The default memory was never given, so the rollback set has none.)
	if !strings.Contains(field(t, out, "active"), `"memory":6`) || field(t, out, "rollback") != `{"name":"web"}` {
		t.Errorf("update --wait up:\n%s", out)
	}
	if b, _ := os.ReadFile(conf); string(b) != "memory=6\n" {
		t.Errorf("after the update: %q", b)
	}
	fails(t, vars, exitFailed, []string{"409", "on_update"}, "lsm", "set-state", "vm", "web", "creating")
	fails(t, vars, exitFailed, []string{"422", "/attributes/name"}, "lsm", "update", "vm", "web", "--attr", "name=other")
	fails(t, vars, exitFailed, []string{"409"}, "lsm", "update", "vm", "web", "--attr", "memory=7", "--version", "1")

	ok(t, vars, "lsm", "delete", "vm", "web", "--wait", "terminated")
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("the file of a terminated instance: %v", err)
	}
}
