package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
	"github.com/intendhq/intend/adapters/resource"
)

// countingFS is the executor's file system, counting the calls of each
// kind that reach the disk.
type countingFS struct {
	localFS
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingFS) count(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

func (c *countingFS) Lstat(path string) (iofs.FileInfo, error) {
	c.count("lstat")
	return c.localFS.Lstat(path)
}

func (c *countingFS) Stat(path string) (iofs.FileInfo, error) {
	c.count("stat")
	return c.localFS.Stat(path)
}

func (c *countingFS) Open(path string) (fsys.ReadFile, error) {
	c.count("open")
	return c.localFS.Open(path)
}

func (c *countingFS) CreateExcl(path string) (fsys.WriteFile, error) {
	c.count("create")
	return c.localFS.CreateExcl(path)
}

func (c *countingFS) Rename(oldpath, newpath string) error {
	c.count("rename")
	return c.localFS.Rename(oldpath, newpath)
}

func (c *countingFS) MkdirAll(path string) error {
	c.count("mkdirall")
	return c.localFS.MkdirAll(path)
}

// countingTarget hands out one countingFS.
type countingTarget struct {
	local
	fs *countingFS
}

func (t countingTarget) Open(context.Context, *adapters.Context, adapters.Resource) (fsys.FS, error) {
	return t.fs, nil
}

func countingFile() (File, *countingFS) {
	c := &countingFS{calls: map[string]int{}}
	return File{target: countingTarget{fs: c}}, c
}

func desiredFile(path, content string) adapters.Resource {
	return adapters.Resource{
		ID:         resource.ID{Type: FileType, Agent: "local", Attribute: "path", Value: path},
		Attributes: map[string]any{"path": path, "content": content, "mode": "0644"},
	}
}

// TestFileCallsOnce checks that an attempt touches the disk once for each
// thing it must know or do (issue 28): an unchanged file is stat'ed and
// read, a new one in an existing directory created and renamed into place
// with no stat of the directory first nor of the file after (its facts
// come from the written file), and a new one in a missing directory finds
// the directory missing by the creation, then makes it.
func TestFileCallsOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	steps := []struct {
		name    string
		path    string
		content string
		want    map[string]int
	}{
		{"a new file in an existing directory", filepath.Join(dir, "f"), "v1\n",
			map[string]int{"lstat": 1, "create": 1, "rename": 1}},
		{"the same file unchanged", filepath.Join(dir, "f"), "v1\n",
			map[string]int{"lstat": 1, "open": 1}},
		{"the same file changed", filepath.Join(dir, "f"), "v2\n",
			map[string]int{"lstat": 2, "open": 1, "create": 1, "rename": 1}},
		{"a new file in a missing directory", filepath.Join(dir, "sub", "dir", "g"), "v1\n",
			map[string]int{"lstat": 1, "create": 2, "stat": 1, "mkdirall": 1, "rename": 1}},
	}
	for _, s := range steps {
		h, c := countingFile()
		hc := adapters.NewContext()
		if _, err := adapters.Run(ctx, h, hc, desiredFile(s.path, s.content), false); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if fmt.Sprint(c.calls) != fmt.Sprint(s.want) {
			t.Errorf("%s: calls %v, want %v", s.name, c.calls, s.want)
		}
		b, err := os.ReadFile(s.path)
		if err != nil || string(b) != s.content {
			t.Errorf("%s: the file holds %q (%v), want %q", s.name, b, err, s.content)
		}
		if facts := hc.Facts(); facts["size"] != int64(len(s.content)) || facts["mtime"] == nil {
			t.Errorf("%s: facts %v, want size %d and an mtime", s.name, facts, len(s.content))
		}
	}
}

// TestFileUnchangedAllocatesLittle checks that observing an unchanged
// file allocates no read buffer of its own: one of 64 KiB per attempt
// was half of what an executor allocated in a repair (issue 28).
func TestFileUnchangedAllocatesLittle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("file 4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := desiredFile(path, "file 4242\n")
	ctx := context.Background()
	run := func() {
		hc := adapters.NewContext()
		out, err := adapters.Run(ctx, File{}, hc, res, false)
		if err != nil || out.Changed {
			t.Fatalf("Run = %+v, %v; want unchanged", out, err)
		}
	}
	run()
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		run()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 16<<10 {
		t.Errorf("an attempt on an unchanged file allocates %d bytes, want at most 16 KiB", per)
	}
}

// TestLocalFiles checks the files localFS opens against package os: what
// they read and tell of themselves, and their errors, which the adapters
// classify.
func TestLocalFiles(t *testing.T) {
	dir := t.TempDir()
	var fs localFS
	path := filepath.Join(dir, "f")
	w, err := fs.CreateExcl(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Chmod(0o640 | iofs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("a second Close succeeded")
	}
	if _, err := fs.CreateExcl(path); !errors.Is(err, iofs.ErrExist) {
		t.Errorf("CreateExcl of an existing file: %v, want ErrExist", err)
	}

	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "hello\n" {
		t.Errorf("read %q, %v", b, err)
	}
	if _, err := f.Seek(1, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(f); string(b) != "ello\n" {
		t.Errorf("read after a seek %q", b)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	lfi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != lfi.Mode() || fi.Size() != lfi.Size() || !fi.ModTime().Equal(lfi.ModTime()) || fi.Name() != lfi.Name() {
		t.Errorf("Stat = %v %d %v %q, Lstat = %v %d %v %q", fi.Mode(), fi.Size(), fi.ModTime(), fi.Name(),
			lfi.Mode(), lfi.Size(), lfi.ModTime(), lfi.Name())
	}
	if u1, g1 := fs.Owner(fi); u1 != uint32(os.Getuid()) || g1 != uint32(os.Getgid()) {
		t.Errorf("Owner = %d:%d, want %d:%d", u1, g1, os.Getuid(), os.Getgid())
	}
	if !fs.SameFile(fi, lfi) || !fs.SameFile(lfi, fi) {
		t.Error("SameFile of the open file and its path is false")
	}
	other, _ := os.Lstat(dir)
	if fs.SameFile(fi, other) {
		t.Error("SameFile of the file and its directory is true")
	}

	missing := filepath.Join(dir, "missing")
	_, err = fs.Open(missing)
	var pe *iofs.PathError
	if !errors.Is(err, iofs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != missing {
		t.Errorf("Open of a missing file: %v, want a PathError of ErrNotExist", err)
	}
}

// TestFileUnderAFile checks that a file whose parent is a regular file
// fails as it did when the parent was looked at before the write: a
// permanent error naming the parent.
func TestFileUnderAFile(t *testing.T) {
	dir := t.TempDir()
	parent := filepath.Join(dir, "p")
	if err := os.WriteFile(parent, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := adapters.Run(context.Background(), File{}, adapters.NewContext(),
		desiredFile(filepath.Join(parent, "f"), "x"), false)
	if adapters.ClassOf(err) != adapters.ClassPermanent || err == nil ||
		!strings.Contains(err.Error(), "parent "+parent+" of "+filepath.Join(parent, "f")+" is not a directory") {
		t.Errorf("a file under a file: %v, want a permanent error naming the parent", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the parent only", len(entries))
	}
}
