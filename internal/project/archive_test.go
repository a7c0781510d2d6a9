package project_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/project"
)

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"intend.yaml": "name: x\n", "main.cue": "package main\n", "lib/web/web.cue": "package web\n",
		"cue.mod/module.cue": "module: \"a.b/c\"\n",
		// A module's packages (internal/modules) are the model's.
		"cue.mod/pkg/example.com/kv/kv.cue": "package kv\n",
		// These stay out: state, version control, the token file, the
		// model's tests (intend test), which no compile reads, and
		// intend's copy of the standard library (the server compiles
		// with its own).
		"data/deploy/pg/PG_VERSION": "15", ".git/HEAD": "ref", ".intend": "token: secret\n", "lib/.git/config": "x",
		"main_test.cue": "package main\n\ntests: {}\n", "lib/web/web_test.cue": "package web\n",
		"cue.mod/pkg/intend.dev/std/fs/fs.cue": "package fs\n",
	})
	packed, err := project.Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, hash := packed.Archive, packed.Hash
	if packed.Files != 5 {
		t.Errorf("files = %d, want 5", packed.Files)
	}
	// The same project, written at another time, archives the same.
	later := filepath.Join(dir, "main.cue")
	if err := os.Chtimes(later, time.Now().Add(time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again, err := project.Archive(dir); err != nil || again.Hash != hash {
		t.Errorf("archive hash changed with a file's time: %s → %s (%v)", hash, again.Hash, err)
	}
	out := filepath.Join(t.TempDir(), "x")
	if err := project.Extract(a, out); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	want := "cue.mod/module.cue cue.mod/pkg/example.com/kv/kv.cue intend.yaml lib/web/web.cue main.cue"
	if strings.Join(got, " ") != want {
		t.Errorf("extracted %v, want %s", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "lib/web/web.cue")); string(b) != "package web\n" {
		t.Errorf("content = %q", b)
	}
}

// tarGz builds an archive by hand, for archives Archive never makes.
func tarGz(t testing.TB, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestExtractRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		archive []byte
		msg     string
	}{
		{"not gzip", []byte("hello"), "not gzip"},
		{"absolute", tarGz(t, &tar.Header{Name: "/etc/passwd", Size: 1}), "clean relative path"},
		{"escapes", tarGz(t, &tar.Header{Name: "../x", Size: 1}), "clean relative path"},
		{"unclean", tarGz(t, &tar.Header{Name: "a/../../x", Size: 1}), "clean relative path"},
		{"symlink", tarGz(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}), "not a regular file"},
		{"directory entry", tarGz(t, &tar.Header{Name: "d/", Typeflag: tar.TypeDir}), "not a regular file"},
		{"twice", tarGz(t, &tar.Header{Name: "a", Size: 1}, &tar.Header{Name: "a", Size: 1}), "appears twice"},
		{"file under a file", tarGz(t, &tar.Header{Name: "a", Size: 1}, &tar.Header{Name: "a/b", Size: 1}), `"a/b"`},
		{"too large", tarGz(t, &tar.Header{Name: "big", Size: project.MaxArchiveBytes + 1}), "more than 32 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := project.Extract(tc.archive, t.TempDir())
			var ae *project.ArchiveError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want an ArchiveError containing %q", err, tc.msg)
			}
		})
	}
}

// FuzzExtract: whatever the archive, Extract does not panic and writes
// nothing outside its directory.
func FuzzExtract(f *testing.F) {
	dir := f.TempDir()
	writeFiles(f, dir, map[string]string{"intend.yaml": "name: x\n", "a/b.cue": "package a\n"})
	good, err := project.Archive(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.Archive)
	f.Add(tarGz(f, &tar.Header{Name: "../escape", Size: 3}))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, archive []byte) {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		_ = project.Extract(archive, out)
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "out" {
				t.Fatalf("Extract wrote %s outside its directory", e.Name())
			}
		}
	})
}
