package fs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

func readFile(t *testing.T, path string) (string, os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return string(b), fi.Mode().Perm()
}

// assertFile checks the content and the permission bits of the file at path.
func assertFile(t *testing.T, path, wantContent string, wantPerm os.FileMode) {
	t.Helper()
	if content, perm := readFile(t, path); content != wantContent || perm != wantPerm {
		t.Errorf("file %s = %q %04o, want %q %04o", path, content, perm, wantContent, wantPerm)
	}
}

// TestLifecycle runs one file through create, no-op, update, chmod and
// purge, in order: each step starts from the disk the previous one left.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "etc", "app", "motd")
	runSteps(t, fs.File{}, file, path, []step{
		{
			name:       "create",
			reason:     "a missing file is created with its parents, content and mode",
			attrs:      map[string]any{"path": path, "content": "hello\n", "mode": "0640"},
			wantAction: "create",
			wantDiff:   []string{"content", "mode", "path"},
			wantLogs:   []string{"created parent directories", "wrote file"},
			check: func(t *testing.T, _ os.FileInfo) {
				assertFile(t, path, "hello\n", 0o640)
			},
		},
		{
			name:       "unchanged",
			reason:     "observing what was just written finds nothing to do",
			attrs:      map[string]any{"path": path, "content": "hello\n", "mode": "0640"},
			wantAction: "none",
		},
		{
			name:       "content",
			reason:     "a content change rewrites the file and keeps the mode",
			attrs:      map[string]any{"path": path, "content": "hello, world\n", "mode": "0640"},
			wantAction: "update",
			wantDiff:   []string{"content"},
			wantLogs:   []string{"updating file", "wrote file"},
			check: func(t *testing.T, _ os.FileInfo) {
				assertFile(t, path, "hello, world\n", 0o640)
			},
		},
		{
			name:       "mode",
			reason:     "a mode change alone is a chmod, not a rewrite",
			attrs:      map[string]any{"path": path, "content": "hello, world\n", "mode": "0600"},
			wantAction: "update",
			wantDiff:   []string{"mode"},
			wantLogs:   []string{"updating file", "changed file mode"},
			check: func(t *testing.T, before os.FileInfo) {
				_, perm := readFile(t, path)
				if perm != 0o600 {
					t.Errorf("mode = %04o, want 0600", perm)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if !os.SameFile(fi, before) {
					t.Errorf("file was replaced, want chmod in place")
				}
			},
		},
		{
			name:       "purge",
			reason:     "a purged resource deletes the file",
			attrs:      map[string]any{"path": path, "content": "hello, world\n"},
			purged:     true,
			wantAction: "delete",
			wantDiff:   []string{"purged"},
			wantLogs:   []string{"removed file"},
			check: func(t *testing.T, _ os.FileInfo) {
				assertGone(t, path)
			},
		},
		{
			name:       "purge again",
			reason:     "purging a missing file is a no-op",
			attrs:      map[string]any{"path": path},
			purged:     true,
			wantAction: "none",
		},
	})
}

func TestDryRunLeavesDiskAlone(t *testing.T) {
	t.Parallel()
	assertDryRunLeavesDiskAlone(t, dryRunSubject{
		handler:  fs.File{},
		resource: file,
		leaf:     "file",
		create: func(t *testing.T, path string) {
			mkdir(t, filepath.Dir(path))
			writeFile(t, path, "old")
		},
	}, []dryRun{
		{
			name:       "create",
			reason:     "neither the file nor its missing parents are created",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "content": "x"} },
			wantAction: "create",
		},
		{
			name:       "update",
			reason:     "a different content is reported, not written",
			existing:   true,
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "content": "new", "mode": "0600"} },
			wantAction: "update",
		},
		dryPurge("file"),
	})
}

func TestInvalidAttributes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "f")
	cases := append(pathRefusals(fs.FileType, dir, good, map[string]any{"content": "x"}), []refusal{
		{"no content", "content is required unless purged",
			file(map[string]any{"path": good}, false), `"content" is required`},
		{"content not string", "content is text",
			file(map[string]any{"path": good, "content": []any{"a"}}, false), `attribute "content": must be a string`},
		{"mode three digits", `"644" would never compare equal to the observed "0644"`,
			file(map[string]any{"path": good, "content": "x", "mode": "644"}, false), `attribute "mode"`},
		{"mode number", "420 from JSON is ambiguous between decimal and octal",
			file(map[string]any{"path": good, "content": "x", "mode": 420.0}, false), `attribute "mode"`},
		{"mode not octal", "8 and 9 are not octal digits",
			file(map[string]any{"path": good, "content": "x", "mode": "0698"}, false), `attribute "mode"`},
		{"mode setuid", "special bits are not managed",
			file(map[string]any{"path": good, "content": "x", "mode": "4755"}, false), "set-id or sticky"},
		{"unknown attributes", "a typo must not be silently ignored",
			file(map[string]any{"path": good, "content": "x", "owner": "root", "grup": "x", "sha256": "x"}, false),
			`unknown attributes "grup", "sha256" (fs::File allows path, content, content_hash, mode, owner, group)`},
		{"unknown when purged", "purged resources are validated too",
			file(map[string]any{"path": good, "target": "x"}, true), `unknown attributes "target"`},
		{"id attribute", "fs::File is identified by path",
			idAttribute(fs.FileType, "name", good, map[string]any{"path": good, "content": "x"}), `resource id names attribute "name"`},
	}...)
	assertRefused(t, fs.File{}, cases, good)
}

func TestNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	writeFile(t, target, "x")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	mkdir(t, sub)
	assertConflicts(t, fs.File{}, func(path string, purged bool) adapters.Resource {
		return file(map[string]any{"path": path, "content": "y"}, purged)
	}, []conflict{
		{"directory", "a directory is never replaced by a file", sub, false, "is a directory"},
		{"directory purged", "an (empty) directory is never removed by a purge", sub, true, "is a directory"},
		{"symlink", "writing through a symlink would change another resource", link, false, "is a symlink"},
		{"symlink purged", "a purge does not remove a symlink it did not create", link, true, "is a symlink"},
	})
	if _, err := os.Stat(sub); err != nil {
		t.Errorf("directory: %v", err)
	}
	if content, _ := readFile(t, target); content != "x" {
		t.Errorf("symlink target = %q, want untouched", content)
	}
}

func TestObserveContent(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a", 16<<20+1)
	binary := "\xff\xfe\x00text"
	digest := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	cases := []struct {
		name    string
		reason  string
		onDisk  string
		desired string
		want    string
	}{
		{"text", "a small text file is reported as is", "a\nb\n", "other", "a\nb\n"},
		{"empty", "an empty file is empty text", "", "x", ""},
		{"binary", "a file that is not UTF-8 is reported by digest", binary, "x", digest(binary)},
		{"big differs", "a file over 16 MiB is reported by digest", big, "x", digest(big)},
		{"big equal", "a big file equal to the desired text reports that text", big, big, big},
		{"digest collision", "a digest equal to the desired text must still differ from it",
			binary, digest(binary), digest(binary) + " (file content)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte(c.onDisk), 0o600); err != nil {
				t.Fatal(err)
			}
			obs, err := fs.File{}.Observe(context.Background(), adapters.NewContext(),
				file(map[string]any{"path": path, "content": c.desired}, false))
			if err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			if !obs.Exists {
				t.Fatalf("%s: exists = false", c.reason)
			}
			if got := obs.Attributes["content"]; got != c.want {
				t.Errorf("%s: content %.80q, want %.80q", c.reason, got, c.want)
			}
			if got := obs.Attributes["mode"]; got != "0600" {
				t.Errorf("%s: mode %v, want 0600", c.reason, got)
			}
		})
	}
}

func TestModeUnmanaged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		reason   string
		existing os.FileMode // 0 for no file
		wantMode os.FileMode
	}{
		{"create", "a new file without a mode gets 0644", 0, 0o644},
		{"update", "a rewrite without a mode keeps the file's mode", 0o751, 0o751},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			if c.existing != 0 {
				if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, c.existing); err != nil {
					t.Fatal(err)
				}
			}
			res := file(map[string]any{"path": path, "content": "new"}, false)
			if _, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(), res, false); err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			assertFile(t, path, "new", c.wantMode)
			out, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(), res, false)
			if err != nil || out.Action != "none" {
				t.Errorf("%s: second run %q %v, want none", c.reason, out.Action, err)
			}
		})
	}
}

func TestNoTemporaryFilesLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := strings.Repeat("n", 250)
	for _, name := range []string{"a", long} {
		res := file(map[string]any{"path": filepath.Join(dir, name), "content": "x"}, false)
		if _, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(), res, false); err != nil {
			t.Fatalf("%d-byte name: %v", len(name), err)
		}
	}
	if names, want := entryNames(t, dir), []string{"a", long}; !slices.Equal(names, want) {
		t.Errorf("directory holds %q, want only the written files", names)
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	r := adapters.NewRegistry()
	fs.Register(r)
	want := []string{fs.DirectoryType, fs.FileType, fs.SymlinkType}
	if got := r.Types(); !slices.Equal(got, want) {
		t.Errorf("types %v, want %v", got, want)
	}
}

func BenchmarkCreate(b *testing.B) {
	const files = 1000
	dir := b.TempDir()
	res := make([]adapters.Resource, files)
	for i := range res {
		res[i] = file(map[string]any{
			"path":    filepath.Join(dir, fmt.Sprintf("f%04d", i)),
			"content": fmt.Sprintf("file %d\n", i),
			"mode":    "0644",
		}, false)
	}
	ctx := context.Background()
	for b.Loop() {
		hc := adapters.NewContext()
		for _, r := range res {
			if err := (fs.File{}).Create(ctx, hc, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
}
