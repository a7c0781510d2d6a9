package fs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/adapters/resource"
)

// symlink returns the desired state of an fs::Symlink with the given
// attributes; the id names attrs["path"] when it is a string.
func symlink(attrs map[string]any, purged bool) adapters.Resource {
	id := resource.ID{Type: fs.SymlinkType, Agent: "local", Attribute: "path"}
	if p, ok := attrs["path"].(string); ok {
		id.Value = p
	}
	return adapters.Resource{ID: id, Attributes: attrs, Purged: purged}
}

func readLink(t *testing.T, path string) string {
	t.Helper()
	target, err := os.Readlink(path)
	if err != nil {
		t.Fatalf("readlink %s: %v", path, err)
	}
	return target
}

// TestSymlinkLifecycle runs one link through create, no-op, retarget and
// purge, in order: each step starts from the disk the previous one left.
func TestSymlinkLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "app", "current")
	other := filepath.Join(dir, "releases", "v2")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "bin"), []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name       string
		reason     string
		attrs      map[string]any
		purged     bool
		wantAction string
		wantDiff   []string
		wantLogs   []string
		check      func(t *testing.T)
	}{
		{
			name:       "create",
			reason:     "a missing link is created with its parents; a relative, dangling target is kept as written",
			attrs:      map[string]any{"path": path, "target": "../../releases/v1"},
			wantAction: "create",
			wantDiff:   []string{"path", "target"},
			wantLogs:   []string{"created parent directories", "wrote symlink"},
			check: func(t *testing.T) {
				if got := readLink(t, path); got != "../../releases/v1" {
					t.Errorf("target = %q, want ../../releases/v1", got)
				}
			},
		},
		{
			name:       "unchanged",
			reason:     "observing what was just linked finds nothing to do",
			attrs:      map[string]any{"path": path, "target": "../../releases/v1"},
			wantAction: "none",
		},
		{
			name:       "retarget",
			reason:     "a target change replaces the link",
			attrs:      map[string]any{"path": path, "target": other},
			wantAction: "update",
			wantDiff:   []string{"target"},
			wantLogs:   []string{"updating symlink", "wrote symlink"},
			check: func(t *testing.T) {
				if got := readLink(t, path); got != other {
					t.Errorf("target = %q, want %q", got, other)
				}
			},
		},
		{
			name:       "unchanged again",
			reason:     "a link to a directory is observed as a link, not followed",
			attrs:      map[string]any{"path": path, "target": other},
			wantAction: "none",
		},
		{
			name:       "purge",
			reason:     "a purged resource removes the link, not what it points to",
			attrs:      map[string]any{"path": path, "target": other},
			purged:     true,
			wantAction: "delete",
			wantDiff:   []string{"purged"},
			wantLogs:   []string{"removed symlink"},
			check: func(t *testing.T) {
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("lstat after purge = %v, want not exist", err)
				}
				if content, _ := readFile(t, filepath.Join(other, "bin")); content != "v2" {
					t.Errorf("target content = %q, want untouched", content)
				}
			},
		},
		{
			name:       "purge again",
			reason:     "purging a missing link is a no-op; target is not required when purged",
			attrs:      map[string]any{"path": path},
			purged:     true,
			wantAction: "none",
		},
	}
	for _, s := range steps {
		hc := adapters.NewContext()
		out, err := adapters.Run(ctx, fs.Symlink{}, hc, symlink(s.attrs, s.purged), false)
		if err != nil {
			t.Fatalf("%s (%s): %v", s.name, s.reason, err)
		}
		if out.Action != s.wantAction || out.Changed != (s.wantAction != "none") {
			t.Errorf("%s (%s): action %q changed %v, want %q", s.name, s.reason, out.Action, out.Changed, s.wantAction)
		}
		if got := out.Diff.Names(); !slices.Equal(got, s.wantDiff) && (len(got) > 0 || len(s.wantDiff) > 0) {
			t.Errorf("%s (%s): diff %v, want %v", s.name, s.reason, got, s.wantDiff)
		}
		if got := messages(hc); !slices.Equal(got, s.wantLogs) {
			t.Errorf("%s (%s): logs %q, want %q", s.name, s.reason, got, s.wantLogs)
		}
		if s.check != nil {
			s.check(t)
		}
	}
}

// TestSymlinkReplaceLeavesNoTemporaries: the atomic replace must leave only
// the link in its directory, also for names near NAME_MAX, and a repeated
// Create (a retry after a crash) must succeed.
func TestSymlinkReplaceLeavesNoTemporaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := strings.Repeat("n", 250)
	for _, name := range []string{"a", long} {
		for _, target := range []string{"one", "one", "two"} {
			res := symlink(map[string]any{"path": filepath.Join(dir, name), "target": target}, false)
			if err := (fs.Symlink{}).Create(context.Background(), adapters.NewContext(), res); err != nil {
				t.Fatalf("%d-byte name, target %s: %v", len(name), target, err)
			}
		}
		if got := readLink(t, filepath.Join(dir, name)); got != "two" {
			t.Errorf("%d-byte name: target %q, want two", len(name), got)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"a", long}; !slices.Equal(names, want) {
		t.Errorf("directory holds %q, want only the links", names)
	}
}

func TestSymlinkDryRunLeavesDiskAlone(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		reason     string
		existing   string // target of an existing link, "" for none
		attrs      func(path string) map[string]any
		purged     bool
		wantAction string
	}{
		{
			name:       "create",
			reason:     "neither the link nor its missing parents are created",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "target": "x"} },
			wantAction: "create",
		},
		{
			name:       "update",
			reason:     "a different target is reported, not linked",
			existing:   "old",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "target": "new"} },
			wantAction: "update",
		},
		{
			name:       "delete",
			reason:     "a purge is reported, the link stays",
			existing:   "old",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p} },
			purged:     true,
			wantAction: "delete",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "sub", "link")
			if c.existing != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(c.existing, path); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, dir)
			hc := adapters.NewContext()
			out, err := adapters.Run(context.Background(), fs.Symlink{}, hc, symlink(c.attrs(path), c.purged), true)
			if err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			if out.Action != c.wantAction || !out.Changed {
				t.Errorf("%s: action %q changed %v, want %q true", c.reason, out.Action, out.Changed, c.wantAction)
			}
			if after := snapshot(t, dir); !mapsEqual(before, after) {
				t.Errorf("%s: disk changed in dry run:\nbefore %v\nafter  %v", c.reason, before, after)
			}
			if c.existing != "" {
				if got := readLink(t, path); got != c.existing {
					t.Errorf("%s: target %q, want %q", c.reason, got, c.existing)
				}
			}
			if logs := hc.Logs(); len(logs) != 0 {
				t.Errorf("%s: dry run logged %v", c.reason, logs)
			}
		})
	}
}

func TestSymlinkInvalidAttributes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "l")
	cases := []refusal{
		{"no path", "path is the id attribute and required",
			symlink(map[string]any{"target": "x"}, false), `"path" is required`},
		{"relative path", "a relative path would depend on the executor's working directory",
			symlink(map[string]any{"path": "etc/current", "target": "x"}, false), "not an absolute path"},
		{"unclean path", "two spellings of one path would be two resources",
			symlink(map[string]any{"path": dir + "/./l", "target": "x"}, false), "not clean"},
		{"path not string", "a number is not a path",
			symlink(map[string]any{"path": 1.0, "target": "x"}, false), `attribute "path": must be a string`},
		{"no target", "target is required unless purged",
			symlink(map[string]any{"path": good}, false), `"target" is required`},
		{"empty target", "the kernel refuses an empty target",
			symlink(map[string]any{"path": good, "target": ""}, false), `attribute "target": must not be empty`},
		{"target with NUL", "a NUL would truncate the target",
			symlink(map[string]any{"path": good, "target": "a\x00b"}, false), `attribute "target": must not contain NUL`},
		{"target not string", "a target is a path string",
			symlink(map[string]any{"path": good, "target": true}, false), `attribute "target": must be a string`},
		{"bad target when purged", "a target given with a purge is still validated",
			symlink(map[string]any{"path": good, "target": 3.0}, true), `attribute "target": must be a string`},
		{"unknown attributes", "a typo must not be silently ignored",
			symlink(map[string]any{"path": good, "target": "x", "mode": "0777", "dest": "y"}, false),
			`unknown attributes "dest", "mode" (fs::Symlink allows path, target)`},
		{"unknown when purged", "purged resources are validated too",
			symlink(map[string]any{"path": good, "owner": "root"}, true), `unknown attributes "owner"`},
		{"id mismatch", "the id and the path attribute must name the same link",
			adapters.Resource{ID: resource.ID{Type: fs.SymlinkType, Agent: "local", Attribute: "path", Value: "/other"},
				Attributes: map[string]any{"path": good, "target": "x"}}, `resource id names path "/other"`},
		{"id attribute", "fs::Symlink is identified by path",
			adapters.Resource{ID: resource.ID{Type: fs.SymlinkType, Agent: "local", Attribute: "target", Value: "x"},
				Attributes: map[string]any{"path": good, "target": "x"}}, `resource id names attribute "target"`},
	}
	assertRefused(t, fs.Symlink{}, cases, good)
}

func TestSymlinkConflicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		reason  string
		path    string
		purged  bool
		wantMsg string
	}{
		{"file", "a file is never replaced by a link", regular, false, "is a regular file, not a symlink"},
		{"file purged", "a purge does not remove a file", regular, true, "is a regular file, not a symlink"},
		{"directory", "a directory is never replaced by a link", empty, false, "is a directory, not a symlink"},
		{"directory purged", "a purge does not remove even an empty directory", empty, true, "is a directory, not a symlink"},
		{"under a file", "a link cannot be made below a regular file", filepath.Join(regular, "l"), false, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := adapters.Run(context.Background(), fs.Symlink{}, adapters.NewContext(),
				symlink(map[string]any{"path": c.path, "target": "elsewhere"}, c.purged), false)
			if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(fmt.Sprint(err), c.wantMsg) {
				t.Errorf("%s: error %v, want permanent %q", c.reason, err, c.wantMsg)
			}
		})
	}
	if content, _ := readFile(t, regular); content != "x" {
		t.Errorf("file = %q, want untouched", content)
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Errorf("directory: %v %v, want untouched and empty", entries, err)
	}
}

// TestSymlinkUnderFileIsAbsent: Observe must report a path below a regular
// file as absent (ENOTDIR), so that a purge of it is a no-op.
func TestSymlinkUnderFileIsAbsent(t *testing.T) {
	t.Parallel()
	regular := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(regular, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := symlink(map[string]any{"path": filepath.Join(regular, "l"), "target": "x"}, false)
	obs, err := fs.Symlink{}.Observe(context.Background(), adapters.NewContext(), res)
	if err != nil || obs.Exists {
		t.Errorf("observe below a file = %v %v, want absent", obs, err)
	}
	res.Purged = true
	if out, err := adapters.Run(context.Background(), fs.Symlink{}, adapters.NewContext(), res, false); err != nil || out.Action != "none" {
		t.Errorf("purge below a file = %q %v, want none", out.Action, err)
	}
}
