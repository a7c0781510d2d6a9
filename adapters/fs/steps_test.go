package fs_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/resource"
)

// pathResource returns the desired state of a resource of type typ with the
// given attributes; the id names attrs["path"] when it is a string. All
// three fs types are identified by their path.
func pathResource(typ string, attrs map[string]any, purged bool) adapters.Resource {
	id := resource.ID{Type: typ, Agent: "local", Attribute: "path"}
	if p, ok := attrs["path"].(string); ok {
		id.Value = p
	}
	return adapters.Resource{ID: id, Attributes: attrs, Purged: purged}
}

// file returns the desired state of an fs::File.
func file(attrs map[string]any, purged bool) adapters.Resource {
	return pathResource(fs.FileType, attrs, purged)
}

// directory returns the desired state of an fs::Directory.
func directory(attrs map[string]any, purged bool) adapters.Resource {
	return pathResource(fs.DirectoryType, attrs, purged)
}

// symlink returns the desired state of an fs::Symlink.
func symlink(attrs map[string]any, purged bool) adapters.Resource {
	return pathResource(fs.SymlinkType, attrs, purged)
}

// invalidAt returns a maker of invalid resources for conformance.Case:
// the resource res makes of attrs with the path p, under the id of the
// good resource at path, so that the suite can check nothing was made
// there.
func invalidAt(res func(map[string]any, bool) adapters.Resource, path string) func(p string, attrs map[string]any) adapters.Resource {
	return func(p string, attrs map[string]any) adapters.Resource {
		r := res(attrs, false)
		r.ID.Value = path
		r.Attributes["path"] = p
		return r
	}
}

// messages returns the messages hc logged, in order.
func messages(hc *adapters.Context) []string {
	var out []string
	for _, l := range hc.Logs() {
		out = append(out, l.Message)
	}
	return out
}

// assertDiffAndLogs checks the attributes a run reported as different and
// the messages it logged; what names the run in a failure.
func assertDiffAndLogs(t *testing.T, what string, out adapters.Outcome, hc *adapters.Context, wantDiff, wantLogs []string) {
	t.Helper()
	if got := out.Diff.Names(); !slices.Equal(got, wantDiff) && (len(got) > 0 || len(wantDiff) > 0) {
		t.Errorf("%s: diff %v, want %v", what, got, wantDiff)
	}
	if got := messages(hc); !slices.Equal(got, wantLogs) {
		t.Errorf("%s: logs %q, want %q", what, got, wantLogs)
	}
}

// step is one run of a lifecycle test: the desired state, why the run
// must do what it does, and what it must report and leave on disk.
type step struct {
	name       string
	reason     string
	attrs      map[string]any
	purged     bool
	wantAction adapters.Operation
	wantDiff   []string
	wantLogs   []string
	// check, if set, inspects the disk after the run; before is what
	// os.Stat said of the path before it, nil if there was nothing.
	check func(t *testing.T, before os.FileInfo)
}

// runSteps runs the steps through h in order, each on the disk the previous
// one left, with the resource res makes of the step's attributes, and
// checks each step's action, diff, logs and check. path is where the
// resource lives.
func runSteps(t *testing.T, h adapters.Handler, res func(map[string]any, bool) adapters.Resource, path string, steps []step) {
	t.Helper()
	for _, s := range steps {
		before, _ := os.Stat(path)
		what := s.name + " (" + s.reason + ")"
		hc := adapters.NewContext()
		out, err := adapters.Run(context.Background(), h, hc, res(s.attrs, s.purged), false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if out.Action != s.wantAction || out.Changed != (s.wantAction != "none") {
			t.Errorf("%s: action %q changed %v, want %q", what, out.Action, out.Changed, s.wantAction)
		}
		assertDiffAndLogs(t, what, out, hc, s.wantDiff, s.wantLogs)
		if s.check != nil {
			s.check(t, before)
		}
	}
}

// dryRun is a desired state that a dry run must report as wantAction
// without applying it.
type dryRun struct {
	name       string
	reason     string
	existing   bool // whether the resource is already there
	attrs      func(path string) map[string]any
	purged     bool
	wantAction adapters.Operation
}

// dryPurge is the dry-run case every fs type shares: a purge of an existing
// resource, named by noun in the reason, is reported and the resource stays.
func dryPurge(noun string) dryRun {
	return dryRun{
		name:       "delete",
		reason:     "a purge is reported, the " + noun + " stays",
		existing:   true,
		attrs:      func(p string) map[string]any { return map[string]any{"path": p} },
		purged:     true,
		wantAction: "delete",
	}
}

// dryRunSubject is the handler a dry-run test drives and how the test makes
// and recognises its resources.
type dryRunSubject struct {
	handler  adapters.Handler
	resource func(attrs map[string]any, purged bool) adapters.Resource
	leaf     string                          // the name of the path, in a directory that does not exist yet
	create   func(t *testing.T, path string) // puts the resource of an existing case in place
	kept     func(t *testing.T, path string) // if set, checks an existing resource after the run
}

// assertDryRunLeavesDiskAlone runs every case dry, in parallel and each in
// its own temporary directory, and checks that it reports its action as a
// change while the disk and the log stay as they were.
func assertDryRunLeavesDiskAlone(t *testing.T, s dryRunSubject, cases []dryRun) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "sub", s.leaf)
			if c.existing {
				s.create(t, path)
			}
			before := snapshot(t, dir)
			hc := adapters.NewContext()
			out, err := adapters.Run(context.Background(), s.handler, hc, s.resource(c.attrs(path), c.purged), true)
			if err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			if out.Action != c.wantAction || !out.Changed {
				t.Errorf("%s: action %q changed %v, want %q true", c.reason, out.Action, out.Changed, c.wantAction)
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("%s: disk changed in dry run:\nbefore %v\nafter  %v", c.reason, before, after)
			}
			if c.existing && s.kept != nil {
				s.kept(t, path)
			}
			if logs := hc.Logs(); len(logs) != 0 {
				t.Errorf("%s: dry run logged %v", c.reason, logs)
			}
		})
	}
}

// snapshot lists every entry under dir with its content, to prove that a
// dry run left the disk as it was.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertAbsentBelowFile checks that h observes a path below a regular file
// as absent (ENOTDIR), so that a purge of it is a no-op. res makes the
// resource at a path.
func assertAbsentBelowFile(t *testing.T, h adapters.Handler, res func(path string) adapters.Resource) {
	t.Helper()
	regular := filepath.Join(t.TempDir(), "file")
	writeFile(t, regular, "x")
	r := res(filepath.Join(regular, "sub"))
	obs, err := h.Observe(context.Background(), adapters.NewContext(), r)
	if err != nil || obs.Exists {
		t.Errorf("observe below a file = %v %v, want absent", obs, err)
	}
	r.Purged = true
	if out, err := adapters.Run(context.Background(), h, adapters.NewContext(), r, false); err != nil || out.Action != "none" {
		t.Errorf("purge below a file = %q %v, want none", out.Action, err)
	}
}

// assertGone checks that nothing, not even a dangling symlink, is at path.
func assertGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("lstat %s = %v, want not exist", path, err)
	}
}

// writeFile writes content to a new regular file at path with mode 0644.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mkdir makes the directory path, and its parents, with mode 0755.
func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// entryNames returns the names of the entries of dir, sorted.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
