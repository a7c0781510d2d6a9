package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestLSMWatchConfigExpert: intend lsm config turns the entity's auto
// transfers off and on; set-state takes the auto transfers by hand; intend
// lsm expert forces a state and an active set; intend lsm watch, running
// all along, prints every transfer in order and ends at terminated; watch
// --json prints the whole log as JSON lines, -o yaml as YAML documents.
func TestLSMWatchConfigExpert(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _, target := vmServer(t, "lsmwatch", "")

	if out := ok(t, vars, "lsm", "config", "vm"); field(t, out, "auto_transfers") != "true" {
		t.Fatalf("config:\n%s", out)
	}
	if out := ok(t, vars, "lsm", "config", "vm", "--auto-transfers=false"); field(t, out, "auto_transfers") != "false" {
		t.Fatalf("config --auto-transfers=false:\n%s", out)
	}
	// A wait for up ends at once where the instance waits for a
	// set-state, rather than after its timeout.
	r := fails(t, vars, exitFailed, []string{"is start (version 1), not up, and stays there until a request moves it"},
		"lsm", "create", "vm", "--attr", "name=web", "--wait", "up", "--timeout", "1m")
	out := r.out
	if field(t, out, "state") != "start" {
		t.Fatalf("create:\n%s", out)
	}
	id := field(t, out, "id") // a terminated instance is found by its id only
	watched := make(chan cliResult, 1)
	go func() { watched <- cli(t, vars, "lsm", "watch", "vm", "web", "--after", "0") }()

	ok(t, vars, "lsm", "set-state", "vm", "web", "acknowledged")
	ok(t, vars, "lsm", "set-state", "vm", "web", "creating", "--wait", "up")
	ok(t, vars, "lsm", "config", "vm", "--auto-transfers=true")
	fails(t, vars, exitUsage, []string{"--reason"}, "lsm", "expert", "vm", "web", "--state", "up")
	fails(t, vars, exitUsage, []string{"--active-attrs"}, "lsm", "expert", "vm", "web", "--active-attrs", "[1]", "--reason", "r")
	fails(t, vars, exitUsage, []string{"--state"}, "lsm", "expert", "vm", "web", "--reason", "r")
	fails(t, vars, exitFailed, []string{"422", "/state"}, "lsm", "expert", "vm", "web", "--state", "nowhere", "--reason", "r")
	out = ok(t, vars, "lsm", "expert", "vm", "web", "--state", "up", "--active-attrs", `{"name":"web","memory":3}`,
		"--reason", "resized by hand")
	if field(t, out, "state") != "up" || !strings.Contains(field(t, out, "active"), `"memory":3`) {
		t.Fatalf("expert:\n%s", out)
	}
	conf := filepath.Join(target, "web.conf")
	wait.For(t, "the forced active set to be deployed", 60*time.Second, func() error {
		b, err := os.ReadFile(conf)
		return wait.Unless(string(b) == "memory=3\n", "%s = %q, %v", conf, b, err)
	})
	ok(t, vars, "lsm", "delete", "vm", "web", "--wait", "terminated")

	select {
	case r = <-watched:
	case <-time.After(60 * time.Second):
		t.Fatal("watch did not end at terminated")
	}
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	wants := []string{"version 1  start  (create)", "start → acknowledged  (auto)  by token:",
		"acknowledged → creating  (auto)  by token:", "creating → up  (resource)",
		`up → up  (expert)  by token:`, `reason: "resized by hand"`, "deleting → terminated  (resource)"}
	for _, w := range wants {
		if !strings.Contains(r.out, w) {
			t.Errorf("watch lacks %q:\n%s", w, r.out)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "[end]") {
		t.Errorf("watch's last line %q", last)
	}

	out = ok(t, vars, "lsm", "watch", "vm", id, "--after", "0", "--json")
	var versions []int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var te client.TransferEvent
		if err := json.Unmarshal([]byte(line), &te); err != nil {
			t.Fatalf("watch --json line %q: %v", line, err)
		}
		versions = append(versions, te.Version)
	}
	if len(versions) != len(lines) || versions[0] != 1 || versions[len(versions)-1] != int64(len(versions)) {
		t.Errorf("watch --json versions %v; watch printed %d lines", versions, len(lines))
	}
	// -o yaml: one YAML document per event, the same events.
	dec := yaml.NewDecoder(strings.NewReader(ok(t, vars, "lsm", "watch", "vm", id, "--after", "0", "-o", "yaml")))
	var yamlVersions []int64
	for {
		var te struct {
			Version int64 `yaml:"version"`
		}
		if err := dec.Decode(&te); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("watch -o yaml: %v", err)
		}
		yamlVersions = append(yamlVersions, te.Version)
	}
	if !slices.Equal(yamlVersions, versions) {
		t.Errorf("watch -o yaml versions %v, --json's %v", yamlVersions, versions)
	}
	fails(t, vars, exitUsage, []string{"--after"}, "lsm", "watch", "vm", "web", "--after", "-5")
}
