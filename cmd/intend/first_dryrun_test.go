package main

import (
	"os"
	"strings"
	"testing"
)

// TestFirstDryrunOfANewEnvironment: `intend deploy --dry-run` on a project
// never deployed shows what would be added and changes nothing. Its
// version names agents no released version has: the embedded executor
// serves them while the dry-run is open. It used to wait for an executor
// until the agent timeout (10 minutes), then show every resource
// unavailable.
func TestFirstDryrunOfANewEnvironment(t *testing.T) {
	dir, root := quickstart(t)
	out, err := runCmd(t, "deploy", dir, "--dry-run", "--timeout", "90s")
	if err != nil {
		t.Fatalf("intend deploy --dry-run on a new project: %v\n%s", err, out)
	}
	if !strings.Contains(out, "11 added") || strings.Contains(out, "unavailable") {
		t.Errorf("the first dry-run does not show 11 resources added:\n%s", out)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the dry-run made %s (%v)", root, err)
	}
}
