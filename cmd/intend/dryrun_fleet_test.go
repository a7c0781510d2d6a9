package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// TestDryrunPreviewsServiceInstances: intend dryrun of a model change
// shows what it would do to every live service instance — an instance
// whose file would change with the content's diff, one the new model
// refuses with its error — counts them, and --detailed-exitcode exits 2
// for them (the version itself has no resource of its own that changes).
func TestDryrunPreviewsServiceInstances(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, dir, target := vmServer(t, "fleet", "")
	ok(t, vars, "lsm", "create", "vm", "--attr", "name=web", "--wait", "up")
	ok(t, vars, "lsm", "create", "vm", "--attr", "name=big", "--attr", "memory=50", "--wait", "up")

	// The new model writes cpus too and allows at most 32 GiB.
	model := strings.Replace(vmModel(target, "<=32"), `content: "memory=\(parameter.memory)\n"`,
		`content: "memory=\(parameter.memory)\ncpus=1\n"`, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.cue"), []byte(model), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, vars, "dryrun", dir, "--detailed-exitcode")
	var ee *exitError
	if r.code != exitChanges || !errors.As(r.err, &ee) || !ee.quiet {
		t.Fatalf("dryrun --detailed-exitcode of a model change: %s", r)
	}
	for _, want := range []string{
		"service instances, the new model against version ",
		"changed     vm web (",
		"  modified  fs::File[localhost,path=" + target + "/web.conf]\n            content:\n",
		"              +cpus=1\n",
		"failed      vm big (",
		"            error: ",
		"service instances: 1 changed, 1 failed\n",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("dryrun output lacks %q:\n%s", want, r.out)
		}
	}
	if i := strings.Index(r.out, "failed      vm big ("); i < 0 || !strings.Contains(r.out[i:], "memory") {
		t.Errorf("big's error does not name memory:\n%s", r.out)
	}
}

// TestFleetWouldChange: --detailed-exitcode's decision over the
// instances: a changed or failed instance is a change, no preview none.
func TestFleetWouldChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    *fleetPreview
		want bool
	}{
		{nil, false},
		{&fleetPreview{Counts: map[string]int{client.PreviewUnchanged: 3}}, false},
		{&fleetPreview{Counts: map[string]int{client.PreviewUnchanged: 3, client.PreviewChanged: 1}}, true},
		{&fleetPreview{Counts: map[string]int{client.PreviewFailed: 1}}, true},
	} {
		if got := tc.f.wouldChange(); got != tc.want {
			t.Errorf("wouldChange(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
}
