package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestCommand runs intend test as a model author would: the quick
// start's tests pass (exit 0); a test whose expectation the model does
// not meet fails (exit 1) with the expectation's file:line:column and
// what was wanted and got; --run selects; --json is for CI; a bad
// --run is a usage error.
func TestTestCommand(t *testing.T) {
	out := ok(t, nil, "test", "../../examples/quickstart")
	for _, want := range []string{"ok    the host's own resources (", "ok    a port below 1024 is refused (", "PASS  4 tests in 1 file ("} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	dir := copyExampleWith(t, "quickstart", nil)
	file := filepath.Join(dir, "main_test.cue")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), `mode:    "0640"`, `mode:    "0600"`, 1)
	if changed == string(b) {
		t.Fatal("examples/quickstart/main_test.cue no longer expects mode 0640")
	}
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, nil, "test", dir)
	if r.code != exitFailed || r.err == nil || !strings.Contains(r.err.Error(), "1 of 4 tests failed") {
		t.Fatalf("want exit 1, 1 of 4 tests failed: %s", r)
	}
	for _, want := range []string{
		"FAIL  an app: its directory, configuration, release and symlink (",
		`      main_test.cue:23:4: resources["fs::File[localhost,path=/tmp/intend-quickstart/apps/shop/config.json]"].mode: want "0600", got "0640"` + "\n",
		"FAIL  1 of 4 tests failed (",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}

	out = ok(t, nil, "test", dir, "--run", "^a (new app|port)", "--json", "-v")
	var rep struct {
		Tests []struct {
			Name      string   `json:"name"`
			Passed    bool     `json:"passed"`
			Resources []string `json:"resources"`
		} `json:"tests"`
		Passed int `json:"passed"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if rep.Passed != 2 || len(rep.Tests) != 2 || rep.Tests[0].Name != "a new app from its parameters" || len(rep.Tests[0].Resources) != 15 {
		t.Errorf("--run --json -v: %+v", rep)
	}

	fails(t, nil, exitUsage, []string{"--run: error parsing regexp"}, "test", dir, "--run", "(")
	fails(t, nil, exitFailed, []string{"intend.yaml: not found"}, "test", t.TempDir())
}

// TestInitWritesAPassingTest: a fresh project has a test of its first
// model, and it passes.
func TestInitWritesAPassingTest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh")
	ok(t, nil, "init", dir)
	out := ok(t, nil, "test", dir)
	if !strings.Contains(out, "ok    hello.txt says hello") || !strings.Contains(out, "PASS  1 test in 1 file") {
		t.Errorf("intend test of a fresh project:\n%s", out)
	}
}
