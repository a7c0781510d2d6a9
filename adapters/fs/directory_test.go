package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

func dirMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("lstat %s: %v", path, err)
	}
	if !fi.IsDir() {
		t.Fatalf("%s is %s, want a directory", path, fi.Mode().Type())
	}
	return fi.Mode()
}

// TestDirectoryLifecycle runs one directory through create, no-op, chmod
// and purge, in order: each step starts from the disk the previous one left.
func TestDirectoryLifecycle(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "srv", "app", "data")
	runSteps(t, fs.Directory{}, directory, path, []step{
		{
			name:       "create",
			reason:     "a missing directory is created with its parents and its mode, whatever the umask",
			attrs:      map[string]any{"path": path, "mode": "0777"},
			wantAction: "create",
			wantDiff:   []string{"mode", "path"},
			wantLogs:   []string{"created parent directories", "created directory"},
			check: func(t *testing.T, _ os.FileInfo) {
				if perm := dirMode(t, path).Perm(); perm != 0o777 {
					t.Errorf("mode = %04o, want 0777", perm)
				}
				if perm := dirMode(t, filepath.Dir(path)).Perm(); perm&0o700 != 0o700 {
					t.Errorf("parent mode = %04o, want at least 0700", perm)
				}
			},
		},
		{
			name:       "unchanged",
			reason:     "observing what was just created finds nothing to do",
			attrs:      map[string]any{"path": path, "mode": "0777"},
			wantAction: "none",
		},
		{
			name:       "mode",
			reason:     "a mode change is a chmod in place",
			attrs:      map[string]any{"path": path, "mode": "0750"},
			wantAction: "update",
			wantDiff:   []string{"mode"},
			wantLogs:   []string{"updating directory", "changed directory mode"},
			check: func(t *testing.T, before os.FileInfo) {
				if perm := dirMode(t, path).Perm(); perm != 0o750 {
					t.Errorf("mode = %04o, want 0750", perm)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if !os.SameFile(fi, before) {
					t.Errorf("directory was replaced, want chmod in place")
				}
			},
		},
		{
			name:       "unmanaged mode",
			reason:     "without a mode, any mode of an existing directory is right",
			attrs:      map[string]any{"path": path},
			wantAction: "none",
		},
		{
			name:       "purge",
			reason:     "a purged resource removes the empty directory, not its parents",
			attrs:      map[string]any{"path": path, "mode": "0750"},
			purged:     true,
			wantAction: "delete",
			wantDiff:   []string{"purged"},
			wantLogs:   []string{"removed directory"},
			check: func(t *testing.T, _ os.FileInfo) {
				assertGone(t, path)
				dirMode(t, filepath.Dir(path))
			},
		},
		{
			name:       "purge again",
			reason:     "purging a missing directory is a no-op",
			attrs:      map[string]any{"path": path},
			purged:     true,
			wantAction: "none",
		},
	})
}

func TestDirectoryDefaultMode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		reason   string
		existing os.FileMode // 0 for no directory
		wantMode os.FileMode
	}{
		{"create", "a new directory without a mode gets 0755", 0, 0o755},
		{"existing", "an existing directory without a desired mode keeps its mode", 0o701, 0o701},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "d")
			if c.existing != 0 {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, c.existing); err != nil {
					t.Fatal(err)
				}
			}
			res := directory(map[string]any{"path": path}, false)
			if _, err := adapters.Run(context.Background(), fs.Directory{}, adapters.NewContext(), res, false); err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			if perm := dirMode(t, path).Perm(); perm != c.wantMode {
				t.Errorf("%s: mode %04o, want %04o", c.reason, perm, c.wantMode)
			}
			out, err := adapters.Run(context.Background(), fs.Directory{}, adapters.NewContext(), res, false)
			if err != nil || out.Action != "none" {
				t.Errorf("%s: second run %q %v, want none", c.reason, out.Action, err)
			}
		})
	}
}

// TestDirectoryCreateRepeated calls Create twice, as an attempt that crashed
// after its Mkdir and was retried would.
func TestDirectoryCreateRepeated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "d")
	for _, mode := range []string{"0700", "0711"} {
		hc := adapters.NewContext()
		if err := (fs.Directory{}).Create(context.Background(), hc,
			directory(map[string]any{"path": path, "mode": mode}, false)); err != nil {
			t.Fatalf("create with %s: %v", mode, err)
		}
	}
	if perm := dirMode(t, path).Perm(); perm != 0o711 {
		t.Errorf("mode %04o, want the mode of the repeat, 0711", perm)
	}
}

// TestDirectoryKeepsSpecialBits: set-id and sticky bits are not managed, so
// a chmod must not clear the set-group-id bit of a shared directory.
func TestDirectoryKeepsSpecialBits(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o770|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if m := dirMode(t, path); m&os.ModeSetgid == 0 || m&os.ModeSticky == 0 {
		t.Fatalf("setup: mode %v lacks setgid or sticky", m)
	}
	res := directory(map[string]any{"path": path, "mode": "0775"}, false)
	obs, err := fs.Directory{}.Observe(context.Background(), adapters.NewContext(), res)
	if err != nil {
		t.Fatal(err)
	}
	if got := obs.Attributes["mode"]; got != "0770" {
		t.Errorf("observed mode %v, want 0770 (permission bits only)", got)
	}
	if _, err := adapters.Run(context.Background(), fs.Directory{}, adapters.NewContext(), res, false); err != nil {
		t.Fatal(err)
	}
	if m := dirMode(t, path); m.Perm() != 0o775 || m&os.ModeSetgid == 0 || m&os.ModeSticky == 0 {
		t.Errorf("mode after update %v, want drwxrwxr-x with setgid and sticky kept", m)
	}
}

func TestDirectoryDryRunLeavesDiskAlone(t *testing.T) {
	t.Parallel()
	assertDryRunLeavesDiskAlone(t, dryRunSubject{
		handler:  fs.Directory{},
		resource: directory,
		leaf:     "d",
		create: func(t *testing.T, path string) {
			mkdir(t, path)
			if err := os.Chmod(path, 0o755); err != nil {
				t.Fatal(err)
			}
		},
	}, []dryRun{
		{
			name:       "create",
			reason:     "neither the directory nor its missing parents are created",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p} },
			wantAction: "create",
		},
		{
			name:       "update",
			reason:     "a different mode is reported, not set",
			existing:   true,
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "mode": "0700"} },
			wantAction: "update",
		},
		dryPurge("directory"),
	})
}

func TestDirectoryInvalidAttributes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "d")
	cases := append(pathRefusals(fs.DirectoryType, dir, good, map[string]any{"mode": "0755"}), []refusal{
		{"mode three digits", `"755" would never compare equal to the observed "0755"`,
			directory(map[string]any{"path": good, "mode": "755"}, false), `attribute "mode"`},
		{"mode number", "493 from JSON is ambiguous between decimal and octal",
			directory(map[string]any{"path": good, "mode": 493.0}, false), `attribute "mode"`},
		{"mode not octal", "8 and 9 are not octal digits",
			directory(map[string]any{"path": good, "mode": "0789"}, false), `attribute "mode"`},
		{"mode sticky", "special bits are not managed, and the error names the right type",
			directory(map[string]any{"path": good, "mode": "1777"}, false), "set-id or sticky bits, which fs::Directory"},
		{"content", "a directory has no content; fs::File's attributes are not accepted",
			directory(map[string]any{"path": good, "content": "x"}, false), `unknown attributes "content" (fs::Directory allows path, mode, owner, group)`},
		{"unknown when purged", "purged resources are validated too",
			directory(map[string]any{"path": good, "recurse": true, "target": "x"}, true), `unknown attributes "recurse", "target"`},
		{"id attribute", "fs::Directory is identified by path",
			idAttribute(fs.DirectoryType, "name", good, map[string]any{"path": good}), `resource id names attribute "name"`},
	}...)
	assertRefused(t, fs.Directory{}, cases, good)
}

func TestDirectoryConflicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	writeFile(t, regular, "x")
	target := filepath.Join(dir, "target")
	mkdir(t, target)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	mkdir(t, full)
	kept := filepath.Join(full, "kept")
	writeFile(t, kept, "not ours")
	assertConflicts(t, fs.Directory{}, func(path string, purged bool) adapters.Resource {
		return directory(map[string]any{"path": path, "mode": "0700"}, purged)
	}, []conflict{
		{"file", "a file is never replaced by a directory", regular, false, "is a regular file, not a directory"},
		{"file purged", "a purge does not remove a file", regular, true, "is a regular file, not a directory"},
		{"symlink", "a symlink to a directory is not the directory", link, false, "is a symlink, not a directory"},
		{"symlink purged", "a purge does not remove a symlink", link, true, "is a symlink, not a directory"},
		{"under a file", "a directory cannot be made below a regular file", filepath.Join(regular, "sub"), false, "not a directory"},
		{"not empty", "intend never deletes content it does not manage", full, true, "is not empty"},
	})
	if content, _ := readFile(t, regular); content != "x" {
		t.Errorf("file = %q, want untouched", content)
	}
	if content, _ := readFile(t, kept); content != "not ours" {
		t.Errorf("entry of the non-empty directory = %q, want untouched", content)
	}
	if perm := dirMode(t, target).Perm(); perm != 0o755 {
		t.Errorf("symlink target mode %04o, want untouched 0755", perm)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink: %v %v, want untouched", fi, err)
	}
}

// TestDirectoryUnderFileIsAbsent: Observe must report a path below a regular
// file as absent (ENOTDIR), so that a purge of it is a no-op.
func TestDirectoryUnderFileIsAbsent(t *testing.T) {
	t.Parallel()
	assertAbsentBelowFile(t, fs.Directory{}, func(path string) adapters.Resource {
		return directory(map[string]any{"path": path}, false)
	})
}
