package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
)

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, &out, &out)
	return out.String(), err
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{}, {"server"}, {"executor"}, {"migrate"}, {"deploy"}} {
		out, err := runCmd(t, append(cmd, "--help")...)
		if err != nil || !strings.Contains(out, "Usage:") {
			t.Errorf("intend %v --help: %v\n%s", cmd, err, out)
		}
	}
}

func TestFlagErrorsAreClear(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
		why  string
	}{
		{[]string{"executor"}, "--environment and at least one --agent", "executor needs to know what to serve"},
		{[]string{"server", "--log-level", "loud"}, `--log-level "loud"`, "a bad log level is named"},
		{[]string{"deploy", "/does/not/exist"}, "/does/not/exist", "a missing path is named"},
		{[]string{"nonsense"}, `unknown command "nonsense"`, "unknown commands are refused"},
	}
	for _, c := range cases {
		_, err := runCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: intend %v: got %v, want an error containing %q", c.why, c.args, err, c.want)
		}
	}
}

// TestQuickstartIsAValidVersion keeps the example that `make demo` deploys
// exportable.
func TestQuickstartIsAValidVersion(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../examples/quickstart/resources.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := intent.DecodeBytes(b); err != nil {
		t.Fatalf("examples/quickstart/resources.json: %v", err)
	}
}

// TestEmbeddedDeploy runs `intend deploy` as `make demo` does: it starts
// PostgreSQL and Temporal from the local binaries, deploys files, stops,
// and deploys again on the same data directory.
func TestEmbeddedDeploy(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out", "hello.txt")
	version := map[string]any{"resources": []map[string]any{{
		"id":         "fs::File[localhost,path=" + target + "]",
		"attributes": map[string]any{"path": target, "content": "hello\n", "mode": "0644"},
	}}}
	b, _ := json.Marshal(version)
	if err := os.WriteFile(filepath.Join(dir, "resources.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	out, err := runCmd(t, "deploy", dir, "--data-dir", data, "--environment", "demo")
	if err != nil {
		t.Fatalf("intend deploy: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "hello\n" {
		t.Fatalf("deployed file = %q, %v\n%s", got, err, out)
	}
	for _, want := range []string{"version 1", "1 deployed, 0 failed, 0 skipped", "Temporal UI: http://"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Deploy again on the same state: version 2 changes
	// nothing, so nothing is redeployed (repair comes with the scheduler).
	out, err = runCmd(t, "deploy", dir, "--data-dir", data, "--environment", "demo")
	if err != nil {
		t.Fatalf("second intend deploy: %v\n%s", err, out)
	}
	if !strings.Contains(out, "version 2") || !strings.Contains(out, "0 deployed, 0 failed, 0 skipped") {
		t.Errorf("second deploy output:\n%s", out)
	}
}

// TestComposeUsesKnownVariables keeps deploy/compose.yaml honest: every
// INTEND_* variable it sets is one some intend command reads.
func TestComposeUsesKnownVariables(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var help strings.Builder
	for _, cmd := range []string{"server", "executor", "migrate", "deploy"} {
		out, err := runCmd(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		help.WriteString(out)
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "INTEND_") {
			continue
		}
		name := strings.TrimSuffix(strings.Fields(line)[0], ":")
		found++
		if !strings.Contains(help.String(), "env "+name+")") {
			t.Errorf("deploy/compose.yaml sets %s, which no intend command reads", name)
		}
	}
	if found == 0 {
		t.Error("deploy/compose.yaml sets no INTEND_* variable")
	}
}
