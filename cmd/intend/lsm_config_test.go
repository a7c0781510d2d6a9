package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestLSMConfigNames: intend lsm config switches the auto transfers of
// one config name for the entity, and for one instance over it: a create
// waits where the entity holds it (and --wait knows it stays there); the
// instance's own switch takes it on to up; bad switches are usage errors.
func TestLSMConfigNames(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmnames")
	target := filepath.Join(t.TempDir(), "vms")
	model := strings.Replace(vmModel(target, ""), "lifecycle: lsm.simple", `lifecycle: lsm.simple & {
		transfers: [{config_name: "auto_validate"}, {}, {}, {config_name: "auto_creating"}, ...]
	}`, 1)
	writeProject(t, vars, "lsmnames", model)

	fails(t, vars, exitUsage, []string{"NAME=on"}, "lsm", "config", "vm", "--auto-transfer", "auto_creating")
	fails(t, vars, exitUsage, []string{"none of on, off, default"}, "lsm", "config", "vm", "--auto-transfer", "auto_creating=maybe")
	fails(t, vars, exitFailed, []string{"422", "auto_deleting"}, "lsm", "config", "vm", "--auto-transfer", "auto_deleting=off")
	out := ok(t, vars, "lsm", "config", "vm", "--auto-transfer", "auto_creating=off")
	if field(t, out, "auto_transfers") != "true" || field(t, out, "auto_transfer_configs") != "auto_creating=off" {
		t.Fatalf("config --auto-transfer auto_creating=off:\n%s", out)
	}
	r := fails(t, vars, exitFailed, []string{"is acknowledged (version 2), not up, and stays there until a request moves it"},
		"lsm", "create", "vm", "--attr", "name=web", "--wait", "up", "--timeout", "1m")
	if field(t, r.out, "state") != "acknowledged" {
		t.Fatalf("create:\n%s", r.out)
	}
	out = ok(t, vars, "lsm", "config", "vm", "--instance", "web")
	if field(t, out, "effective") != "auto_creating=off auto_validate=on" || field(t, out, "auto_transfer_configs") != "-" {
		t.Fatalf("the instance's config:\n%s", out)
	}
	out = ok(t, vars, "lsm", "config", "vm", "--instance", "web", "--auto-transfer", "auto_creating=on")
	if field(t, out, "effective") != "auto_creating=on auto_validate=on" || field(t, out, "auto_transfer_configs") != "auto_creating=on" {
		t.Fatalf("the instance's config switched on:\n%s", out)
	}
	wait.For(t, "web to be up", 90*time.Second, func() error {
		state := field(t, ok(t, vars, "lsm", "get", "vm", "web"), "state")
		return wait.Unless(state == "up", "web is %s", state)
	})
}
