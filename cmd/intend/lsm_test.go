package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// lsmServer starts a server with its embedded executor and creates an
// environment named after prefix; vars point the CLI at both. It returns
// the server's database too.
func lsmServer(t *testing.T, prefix string) (vars map[string]string, dbURL string) {
	t.Helper()
	c, _, dbURL := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, prefix)
	vars = map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)
	return vars, dbURL
}

// writeProject writes intend.yaml (naming the project name) and main.cue
// (model) into a new directory, exports it and returns the directory.
func writeProject(t *testing.T, vars map[string]string, name, model string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	for file, text := range map[string]string{"intend.yaml": "name: " + name + "\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, vars, "export", dir)
	return dir
}

// vmModel is a model of one service entity, vm, on the simple lifecycle:
// a VM named by its name whose memory (by default 2, at least 1, and
// within limit, a CUE constraint or "") is written to target/NAME.conf.
func vmModel(target, limit string) string {
	if limit != "" {
		limit = " & " + limit
	}
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:   =~"^[a-z]+$" @lsm(rw)
		memory: *2 | int & >=1` + limit + ` @lsm(rw+)
	}
	output: conf: fs.#File & {path: "` + target + `/\(parameter.name).conf", content: "memory=\(parameter.memory)\n"}
}

services: vm: #VM
`
}

// vmServer starts a server (see lsmServer, named after name) and exports
// a project of that name with vmModel(target, limit), target a new
// directory's "vms"; it returns the project's directory and target.
func vmServer(t *testing.T, name, limit string) (vars map[string]string, dir, target string) {
	t.Helper()
	vars, _ = lsmServer(t, name)
	target = filepath.Join(t.TempDir(), "vms")
	return vars, writeProject(t, vars, name, vmModel(target, limit)), target
}

// exportExample copies examples/NAME (see copyExample), exports it with
// -d and checks that the export's output says want.
func exportExample(t *testing.T, vars map[string]string, name, from, want string) (dir, root string) {
	t.Helper()
	dir, root = copyExample(t, name, from)
	if out := ok(t, vars, "export", dir, "-d"); !strings.Contains(out, want) {
		t.Errorf("export does not say %q:\n%s", want, out)
	}
	return dir, root
}

// TestLSMCommands: intend export registers the model's service entities;
// intend lsm shows the catalog and the inventory.
func TestLSMCommands(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, dbURL := lsmServer(t, "lsm")
	envName := vars["INTEND_ENVIRONMENT"]
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
	writeProject(t, vars, "lsm", model)

	out := ok(t, vars, "lsm", "catalog")
	if row := rowOf(t, out, "vm"); row[1] != "simple" || row[2] != "2" {
		t.Errorf("catalog row %v\n%s", row, out)
	}
	// -o wide adds the entity's version and times.
	out = ok(t, vars, "lsm", "catalog", "-o", "wide")
	if h := headerOf(out); h != "ENTITY LIFECYCLE ATTRIBUTES INSTANCES DESCRIPTION VERSION REGISTERED UPDATED MODEL HASH" {
		t.Errorf("catalog -o wide header %q", h)
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
	// -o wide adds the entity version, the creation time and whether deleted.
	out = ok(t, vars, "lsm", "list", "vm", "-o", "wide")
	// (A time is two fields.)
	if row := rowOf(t, out, id); len(row) != 10 || row[6] != "1" || row[9] != "no" {
		t.Errorf("list -o wide row %v\n%s", row, out)
	}
	// Shell completion: entities, then the entity's instances by id and
	// by identity.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"lsm", "show", ""}, []string{"vm"}},
		{[]string{"lsm", "show", "vm", ""}, []string{id, "web"}},
		{[]string{"lsm", "diagnose", "vm", "w"}, []string{"web"}},
		{[]string{"lsm", "log", "vm", id[:4]}, []string{id}},
		{[]string{"lsm", "list", "v"}, []string{"vm"}},
		{[]string{"lsm", "show", "vm", "web", ""}, nil},
	} {
		if got := complete(t, vars, tc.args...); !slices.Equal(got.values, tc.want) || got.directive != directiveNoFileComp {
			t.Errorf("intend __complete %q offered %q %s, want %q", tc.args, got.values, got.directive, tc.want)
		}
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
	var insts []client.ServiceInstance
	jsonOf(t, ok(t, vars, "lsm", "list", "vm", "--json"), &insts)
	if len(insts) != 1 || insts[0].ID != id {
		t.Errorf("list --json: %+v", insts)
	}
}

// TestLSMWriteCommands drives an instance through the simple lifecycle
// with the CLI alone: create → up, update → up, an illegal set-state,
// delete → terminated.
func TestLSMWriteCommands(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _, target := vmServer(t, "lsmw", "")

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
	var insts []client.ServiceInstance
	jsonOf(t, ok(t, vars, "lsm", "list", "vm", "--json"), &insts)
	if len(insts) != 1 {
		t.Errorf("%d instances after a repeated create", len(insts))
	}

	out = ok(t, vars, "lsm", "update", "vm", "web", "--attr", "memory=6", "--wait", "up")
	// The default memory was written into the set at the create.
	if !strings.Contains(field(t, out, "active"), `"memory":6`) || field(t, out, "rollback") != `{"memory":2,"name":"web"}` {
		t.Errorf("update --wait up:\n%s", out)
	}
	if b, _ := os.ReadFile(conf); string(b) != "memory=6\n" {
		t.Errorf("after the update: %q", b)
	}
	// Back to the attributes of version 4 (up after the create).
	out = ok(t, vars, "lsm", "rollback", "vm", "web", "4", "--wait", "up")
	if !strings.Contains(field(t, out, "active"), `"memory":2`) {
		t.Errorf("rollback --wait up:\n%s", out)
	}
	if b, _ := os.ReadFile(conf); string(b) != "memory=2\n" {
		t.Errorf("after the rollback: %q", b)
	}
	// What an update to memory 9 would do, without doing it.
	out = ok(t, vars, "lsm", "dryrun", "vm", "web", "--attr", "memory=9")
	for _, want := range []string{"validation: ok", "1 modified", `content: "memory=2\n" → "memory=9\n"`, "on the targets:", "1 modified"} {
		if !strings.Contains(out, want) {
			t.Errorf("lsm dryrun: no %q in\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(conf); string(b) != "memory=2\n" {
		t.Errorf("after the dry-run: %q", b)
	}
	fails(t, vars, exitFailed, []string{"422", "/attributes/name"}, "lsm", "dryrun", "vm", "web", "--attr", "name=other")
	// The other writes, dry-run: a delete would purge the file, a create
	// would make one, a rollback goes through on_update; an illegal
	// set-state and a stale version are refused as the writes would be.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"web", "--delete"}, []string{"transfer: on_delete up → deleting", "resulting state: deleting (resources: purge)", "on the targets:", "deleted"}},
		{[]string{"web", "--rollback-to", "4"}, []string{"transfer: on_update up → update_start", "validation: ok"}},
		{[]string{"--create", "--attr", "name=db"}, []string{"create of vm", "transfer: create (none) → start", `"memory":2`, "1 added"}},
	} {
		out = ok(t, vars, append([]string{"lsm", "dryrun", "vm"}, tc.args...)...)
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("lsm dryrun vm %v: no %q in\n%s", tc.args, want, out)
			}
		}
	}
	if b, _ := os.ReadFile(conf); string(b) != "memory=2\n" {
		t.Errorf("after the dry-runs: %q", b)
	}
	if _, err := os.Stat(filepath.Join(target, "db.conf")); !os.IsNotExist(err) {
		t.Errorf("db.conf after a create's dry-run: %v", err)
	}
	fails(t, vars, exitFailed, []string{"409", "/target_state"}, "lsm", "dryrun", "vm", "web", "--set-state", "creating")
	fails(t, vars, exitFailed, []string{"409", "/current_version"}, "lsm", "dryrun", "vm", "web", "--delete", "--version", "1")
	fails(t, vars, exitUsage, []string{"one of"}, "lsm", "dryrun", "vm", "web", "--delete", "--rollback-to", "2")
	fails(t, vars, exitUsage, []string{"--create"}, "lsm", "dryrun", "vm", "web", "--create")
	fails(t, vars, exitUsage, []string{"VERSION"}, "lsm", "rollback", "vm", "web", "four")
	fails(t, vars, exitFailed, []string{"422", "/to_version"}, "lsm", "rollback", "vm", "web", "99")
	fails(t, vars, exitFailed, []string{"409", "on_update"}, "lsm", "set-state", "vm", "web", "creating")
	fails(t, vars, exitFailed, []string{"422", "/attributes/name"}, "lsm", "update", "vm", "web", "--attr", "name=other")
	fails(t, vars, exitFailed, []string{"409"}, "lsm", "update", "vm", "web", "--attr", "memory=7", "--version", "1")

	ok(t, vars, "lsm", "delete", "vm", "web", "--wait", "terminated")
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("the file of a terminated instance: %v", err)
	}
}

// TestExampleLSM walks examples/lsm as docs/lsm.md does, with the CLI
// alone: create → up, update → up, an update the model rejects (the wait
// fails, naming it), a delete that cannot finish (the wait stops at
// delete_failed instead of running out its time), its retry with
// set-state, and terminated with the site's files and directories gone.
func TestExampleLSM(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmex")
	_, root := exportExample(t, vars, "lsm", "/tmp/intend-lsm", "service entities: alias (lifecycle simple), proxy (lifecycle simple), site (lifecycle simple)")
	out := ok(t, vars, "lsm", "catalog", "site")
	for _, want := range []string{"identity:     name", "port", "rw+", `"Welcome"`} {
		if !strings.Contains(out, want) {
			t.Errorf("catalog lacks %q:\n%s", want, out)
		}
	}

	site := filepath.Join(root, "sites", "blog")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(site, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	out = ok(t, vars, "lsm", "create", "site", "--attr", "name=blog", "--attr", "port=8081", "--wait", "up")
	if !strings.Contains(field(t, out, "active"), `"url":"http://127.0.0.1:8081/"`) {
		t.Errorf("the r attribute url is not in the active set:\n%s", out)
	}
	if got := read("server.json"); !strings.Contains(got, `"listen":"127.0.0.1:8081","workers":2`) {
		t.Errorf("server.json = %s", got)
	}
	if got := read("public/index.html"); got != "<h1>Welcome</h1>\n" {
		t.Errorf("index.html = %q", got)
	}

	out = ok(t, vars, "lsm", "update", "site", "blog", "--attr", "port=8082", "--attr", "title=Our blog", "--wait", "up")
	if field(t, out, "rollback") != `{"name":"blog","port":8081,"title":"Welcome","url":"http://127.0.0.1:8081/","workers":2}` ||
		!strings.Contains(field(t, out, "active"), `"url":"http://127.0.0.1:8082/"`) {
		t.Errorf("update:\n%s", out)
	}
	if got := read("public/index.html"); got != "<h1>Our blog</h1>\n" {
		t.Errorf("index.html after the update = %q", got)
	}

	// Port 80 passes the request's checks (port is rw+) but not the
	// model's (>=1024): rejected by the validation, back to up unchanged.
	r := fails(t, vars, exitFailed, []string{"update_rejected", "did not take effect", "intend lsm diagnose site blog"},
		"lsm", "update", "site", "blog", "--attr", "port=80", "--wait", "up")
	if field(t, r.out, "state") != "up" || !strings.Contains(field(t, r.out, "active"), `"port":8082`) {
		t.Errorf("after the rejected update:\n%s", r.out)
	}
	if out := ok(t, vars, "lsm", "diagnose", "site", "blog"); !strings.Contains(out, ">=1024") {
		t.Errorf("diagnose does not say why:\n%s", out)
	}
	fails(t, vars, exitFailed, []string{"422", "/attributes/url"}, "lsm", "update", "site", "blog", "--attr", "url=http://x/")
	fails(t, vars, exitUsage, []string{`no state "upp"`}, "lsm", "update", "site", "blog", "--attr", "port=8083", "--wait", "upp")

	// A file intend does not manage keeps the site's directory: the
	// delete fails there, and the wait says so at once.
	stray := filepath.Join(site, "notes.txt")
	if err := os.WriteFile(stray, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	fails(t, vars, exitFailed, []string{"delete_failed", "stays there until a request moves it"},
		"lsm", "delete", "site", "blog", "--wait", "terminated")
	if d := time.Since(began); d > time.Minute {
		t.Errorf("the wait took %v to give up on delete_failed", d)
	}
	if _, err := os.Stat(filepath.Join(site, "public")); !os.IsNotExist(err) {
		t.Errorf("the site's public directory after the failed delete: %v (removed children first)", err)
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}
	ok(t, vars, "lsm", "set-state", "site", "blog", "deleting", "--wait", "terminated")
	if _, err := os.Stat(site); !os.IsNotExist(err) {
		t.Errorf("the site's directory after terminated: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "sites")); err != nil {
		t.Errorf("the model's own sites directory: %v", err)
	}
}
