package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

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
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "app", "current")
	other := filepath.Join(dir, "releases", "v2")
	mkdir(t, other)
	if err := os.WriteFile(filepath.Join(other, "bin"), []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	runSteps(t, fs.Symlink{}, symlink, path, []step{
		{
			name:       "create",
			reason:     "a missing link is created with its parents; a relative, dangling target is kept as written",
			attrs:      map[string]any{"path": path, "target": "../../releases/v1"},
			wantAction: "create",
			wantDiff:   []string{"path", "target"},
			wantLogs:   []string{"created parent directories", "wrote symlink"},
			check: func(t *testing.T, _ os.FileInfo) {
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
			check: func(t *testing.T, _ os.FileInfo) {
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
			check: func(t *testing.T, _ os.FileInfo) {
				assertGone(t, path)
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
	})
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
	if names, want := entryNames(t, dir), []string{"a", long}; !slices.Equal(names, want) {
		t.Errorf("directory holds %q, want only the links", names)
	}
}

func TestSymlinkDryRunLeavesDiskAlone(t *testing.T) {
	t.Parallel()
	assertDryRunLeavesDiskAlone(t, dryRunSubject{
		handler:  fs.Symlink{},
		resource: symlink,
		leaf:     "link",
		create: func(t *testing.T, path string) {
			mkdir(t, filepath.Dir(path))
			if err := os.Symlink("old", path); err != nil {
				t.Fatal(err)
			}
		},
		kept: func(t *testing.T, path string) {
			if got := readLink(t, path); got != "old" {
				t.Errorf("target %q, want old", got)
			}
		},
	}, []dryRun{
		{
			name:       "create",
			reason:     "neither the link nor its missing parents are created",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "target": "x"} },
			wantAction: "create",
		},
		{
			name:       "update",
			reason:     "a different target is reported, not linked",
			existing:   true,
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "target": "new"} },
			wantAction: "update",
		},
		dryPurge("link"),
	})
}

func TestSymlinkInvalidAttributes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "l")
	cases := append(pathRefusals(fs.SymlinkType, dir, good, map[string]any{"target": "x"}), []refusal{
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
		{"id attribute", "fs::Symlink is identified by path",
			idAttribute(fs.SymlinkType, "target", "x", map[string]any{"path": good, "target": "x"}), `resource id names attribute "target"`},
	}...)
	assertRefused(t, fs.Symlink{}, cases, good)
}

func TestSymlinkConflicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	writeFile(t, regular, "x")
	empty := filepath.Join(dir, "empty")
	mkdir(t, empty)
	assertConflicts(t, fs.Symlink{}, func(path string, purged bool) adapters.Resource {
		return symlink(map[string]any{"path": path, "target": "elsewhere"}, purged)
	}, []conflict{
		{"file", "a file is never replaced by a link", regular, false, "is a regular file, not a symlink"},
		{"file purged", "a purge does not remove a file", regular, true, "is a regular file, not a symlink"},
		{"directory", "a directory is never replaced by a link", empty, false, "is a directory, not a symlink"},
		{"directory purged", "a purge does not remove even an empty directory", empty, true, "is a directory, not a symlink"},
		{"under a file", "a link cannot be made below a regular file", filepath.Join(regular, "l"), false, "not a directory"},
	})
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
	assertAbsentBelowFile(t, fs.Symlink{}, func(path string) adapters.Resource {
		return symlink(map[string]any{"path": path, "target": "x"}, false)
	})
}
