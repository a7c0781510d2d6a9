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
	"github.com/intendhq/intend/adapters/resource"
)

// file returns the desired state of an fs::File with the given attributes;
// the id names attrs["path"] when it is a string.
func file(attrs map[string]any, purged bool) adapters.Resource {
	id := resource.ID{Type: fs.FileType, Agent: "local", Attribute: "path"}
	if p, ok := attrs["path"].(string); ok {
		id.Value = p
	}
	return adapters.Resource{ID: id, Attributes: attrs, Purged: purged}
}

func messages(hc *adapters.Context) []string {
	var out []string
	for _, l := range hc.Logs() {
		out = append(out, l.Message)
	}
	return out
}

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

// TestLifecycle runs one file through create, no-op, update, chmod and
// purge, in order: each step starts from the disk the previous one left.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "etc", "app", "motd")
	var lastStat os.FileInfo

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
			reason:     "a missing file is created with its parents, content and mode",
			attrs:      map[string]any{"path": path, "content": "hello\n", "mode": "0640"},
			wantAction: "create",
			wantDiff:   []string{"content", "mode", "path"},
			wantLogs:   []string{"created parent directories", "wrote file"},
			check: func(t *testing.T) {
				content, perm := readFile(t, path)
				if content != "hello\n" || perm != 0o640 {
					t.Errorf("file = %q %04o, want %q 0640", content, perm, "hello\n")
				}
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
			check: func(t *testing.T) {
				content, perm := readFile(t, path)
				if content != "hello, world\n" || perm != 0o640 {
					t.Errorf("file = %q %04o, want %q 0640", content, perm, "hello, world\n")
				}
			},
		},
		{
			name:       "mode",
			reason:     "a mode change alone is a chmod, not a rewrite",
			attrs:      map[string]any{"path": path, "content": "hello, world\n", "mode": "0600"},
			wantAction: "update",
			wantDiff:   []string{"mode"},
			wantLogs:   []string{"updating file", "changed file mode"},
			check: func(t *testing.T) {
				_, perm := readFile(t, path)
				if perm != 0o600 {
					t.Errorf("mode = %04o, want 0600", perm)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if !os.SameFile(fi, lastStat) {
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
			check: func(t *testing.T) {
				if _, err := os.Lstat(path); !os.IsNotExist(err) {
					t.Errorf("lstat after purge = %v, want not exist", err)
				}
			},
		},
		{
			name:       "purge again",
			reason:     "purging a missing file is a no-op",
			attrs:      map[string]any{"path": path},
			purged:     true,
			wantAction: "none",
		},
	}
	for _, s := range steps {
		hc := adapters.NewContext()
		out, err := adapters.Run(ctx, fs.File{}, hc, file(s.attrs, s.purged), false)
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
		lastStat, _ = os.Stat(path)
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

func TestDryRunLeavesDiskAlone(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		reason     string
		existing   string // content of an existing file, "" for none
		attrs      func(path string) map[string]any
		purged     bool
		wantAction string
	}{
		{
			name:       "create",
			reason:     "neither the file nor its missing parents are created",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "content": "x"} },
			wantAction: "create",
		},
		{
			name:       "update",
			reason:     "a different content is reported, not written",
			existing:   "old",
			attrs:      func(p string) map[string]any { return map[string]any{"path": p, "content": "new", "mode": "0600"} },
			wantAction: "update",
		},
		{
			name:       "delete",
			reason:     "a purge is reported, the file stays",
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
			path := filepath.Join(dir, "sub", "file")
			if c.existing != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(c.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, dir)
			hc := adapters.NewContext()
			out, err := adapters.Run(context.Background(), fs.File{}, hc, file(c.attrs(path), c.purged), true)
			if err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			if out.Action != c.wantAction || !out.Changed {
				t.Errorf("%s: action %q changed %v, want %q true", c.reason, out.Action, out.Changed, c.wantAction)
			}
			if after := snapshot(t, dir); !mapsEqual(before, after) {
				t.Errorf("%s: disk changed in dry run:\nbefore %v\nafter  %v", c.reason, before, after)
			}
			if logs := hc.Logs(); len(logs) != 0 {
				t.Errorf("%s: dry run logged %v", c.reason, logs)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func TestInvalidAttributes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "f")
	cases := []refusal{
		{"no path", "path is the id attribute and required",
			file(map[string]any{"content": "x"}, false), `"path" is required`},
		{"relative path", "a relative path would depend on the executor's working directory",
			file(map[string]any{"path": "etc/motd", "content": "x"}, false), "not an absolute path"},
		{"unclean path", "two spellings of one path would be two resources",
			file(map[string]any{"path": dir + "/a/../f", "content": "x"}, false), "not clean"},
		{"trailing slash", "a trailing slash is not clean either",
			file(map[string]any{"path": good + "/", "content": "x"}, false), "not clean"},
		{"path not string", "a number is not a path",
			file(map[string]any{"path": 42.0, "content": "x"}, false), `attribute "path": must be a string`},
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
		{"id mismatch", "the id and the path attribute must name the same file",
			adapters.Resource{ID: resource.ID{Type: fs.FileType, Agent: "local", Attribute: "path", Value: "/other"},
				Attributes: map[string]any{"path": good, "content": "x"}}, `resource id names path "/other"`},
		{"id attribute", "fs::File is identified by path",
			adapters.Resource{ID: resource.ID{Type: fs.FileType, Agent: "local", Attribute: "name", Value: good},
				Attributes: map[string]any{"path": good, "content": "x"}}, `resource id names attribute "name"`},
	}
	assertRefused(t, fs.File{}, cases, good)
}

func TestNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		reason  string
		path    string
		purged  bool
		wantMsg string
	}{
		{"directory", "a directory is never replaced by a file", sub, false, "is a directory"},
		{"directory purged", "an (empty) directory is never removed by a purge", sub, true, "is a directory"},
		{"symlink", "writing through a symlink would change another resource", link, false, "is a symlink"},
		{"symlink purged", "a purge does not remove a symlink it did not create", link, true, "is a symlink"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := adapters.Run(context.Background(), fs.File{}, adapters.NewContext(),
				file(map[string]any{"path": c.path, "content": "y"}, c.purged), false)
			if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(fmt.Sprint(err), c.wantMsg) {
				t.Errorf("%s: error %v, want permanent %q", c.reason, err, c.wantMsg)
			}
		})
	}
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
			content, perm := readFile(t, path)
			if content != "new" || perm != c.wantMode {
				t.Errorf("%s: file %q %04o, want %q %04o", c.reason, content, perm, "new", c.wantMode)
			}
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
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"a", long}; !slices.Equal(names, want) {
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
