package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLSMPutMetadataInitialState: intend lsm create --initial-state,
// intend lsm update --replace and intend lsm metadata, against a server.
func TestLSMPutMetadataInitialState(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmput")
	target := filepath.Join(t.TempDir(), "vms")
	model := strings.Replace(vmModel(target, ""), "lifecycle: lsm.simple",
		`lifecycle: lsm.simple & {initial_states: ["acknowledged"]}`, 1)
	model = strings.Replace(model, "memory: *2", "note?: string @lsm(rw+)\n\t\tmemory: *2", 1)
	writeProject(t, vars, "lsmput", model)

	fails(t, vars, exitFailed, []string{"422", "/initial_state", `"start"`, `"acknowledged"`},
		"lsm", "create", "vm", "--attr", "name=web", "--initial-state", "up")
	out := ok(t, vars, "lsm", "create", "vm", "--attr", "name=web", "--attr", "memory=5", "--attr", "note=hi",
		"--initial-state", "acknowledged", "--wait", "up")
	if field(t, out, "active") != `{"memory":5,"name":"web","note":"hi"}` {
		t.Fatalf("create --initial-state acknowledged --wait up:\n%s", out)
	}

	// --replace: note is gone, memory back to its default.
	out = ok(t, vars, "lsm", "update", "vm", "web", "--replace", "--attr", "name=web", "--wait", "up")
	if field(t, out, "active") != `{"memory":2,"name":"web"}` {
		t.Errorf("update --replace --wait up:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(target, "web.conf")); string(b) != "memory=2\n" {
		t.Errorf("after the replace: %q", b)
	}
	fails(t, vars, exitFailed, []string{"422", "/attributes/name"}, "lsm", "update", "vm", "web", "--replace", "--attr", "name=www")
	version := field(t, ok(t, vars, "lsm", "show", "vm", "web"), "version")

	// Metadata: set, merge, remove, replace; no new version.
	out = ok(t, vars, "lsm", "metadata", "vm", "web", "owner=ops", `ticket={"id":7}`)
	if field(t, out, "owner") != `"ops"` || field(t, out, "ticket") != `{"id":7}` {
		t.Errorf("metadata set:\n%s", out)
	}
	out = ok(t, vars, "lsm", "metadata", "vm", "web", "--rm", "ticket", "cost=3")
	if field(t, out, "owner") != `"ops"` || field(t, out, "cost") != "3" || strings.Contains(out, "ticket") {
		t.Errorf("metadata --rm:\n%s", out)
	}
	out = ok(t, vars, "lsm", "metadata", "vm", "web", "--replace", "only=yes")
	if strings.TrimSpace(out) != `only:  "yes"` {
		t.Errorf("metadata --replace:\n%s", out)
	}
	if out := ok(t, vars, "lsm", "metadata", "vm", "web"); strings.TrimSpace(out) != `only:  "yes"` {
		t.Errorf("metadata:\n%s", out)
	}
	show := ok(t, vars, "lsm", "show", "vm", "web")
	if field(t, show, "version") != version || field(t, show, "metadata") != `{"only":"yes"}` {
		t.Errorf("show after metadata writes (version was %s):\n%s", version, show)
	}
	fails(t, vars, exitFailed, []string{"422", "/metadata"}, "lsm", "metadata", "vm", "web", "big="+strings.Repeat("x", 17<<10))
	fails(t, vars, exitUsage, []string{"--rm"}, "lsm", "metadata", "vm", "web", "--replace", "--rm", "only")
}
