package project

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The model source of an environment is its project as an archive: the
// server compiles service instances from it (docs/architecture.md, the
// lifecycle service manager), whichever usage mode exported the model.

// MaxArchiveBytes bounds a project archive, compressed and unpacked.
const MaxArchiveBytes = 32 << 20

// StdCopyDir is where intend init writes the standard library for the cue
// tools (compiler.StdDir, which imports this package).
const StdCopyDir = "cue.mod/pkg/intend.dev/std"

// maxArchiveFiles bounds the files of a project archive.
const maxArchiveFiles = 10000

// skipped reports whether a project's file or directory (slash path
// relative to the project) stays out of its archive: the embedded
// deploy's state, version control, .intend, which may hold a token, and
// the model's tests (*_test.cue, intend test), which no compile reads
// (a change of a test is no new model source), and intend's copy of the
// standard library for the cue tools (the server compiles with its own;
// compiler.StdDir).
func skipped(rel string, dir bool) bool {
	base := path.Base(rel)
	switch {
	case base == ".git", dir && rel == "data", dir && rel == StdCopyDir:
		return true
	case !dir && (rel == LocalFileName || strings.HasSuffix(base, "_test.cue")):
		return true
	}
	return false
}

// CheckTree refuses a project tree (a git checkout the server compiles)
// that holds anything but directories and regular files outside .git and
// data/: a symlink could lead the compiler out of the project (to
// /etc/shadow, or another environment's checkout), and archives leave
// links out, so what was compiled would not be what is stored. The error
// names the first few.
func CheckTree(dir string) error {
	var bad []string
	err := walkProject(dir, func(rel string, d fs.DirEntry) error {
		if d.IsDir() || d.Type().IsRegular() {
			return nil
		}
		kind := "not a regular file"
		if d.Type()&fs.ModeSymlink != 0 {
			kind = "a symbolic link"
		}
		bad = append(bad, rel+" ("+kind+")")
		if len(bad) == 10 {
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("the project holds what the server does not compile: %s; a project is directories and "+
			"regular files only (links are not followed)", strings.Join(bad, ", "))
	}
	return nil
}

// walkProject calls fn for every entry of the project in dir (a slash
// path relative to it) but those that stay out of archives (skipped).
func walkProject(dir string, fn func(rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skipped(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(rel, d)
	})
}

// Packed is a project archive.
type Packed struct {
	Archive []byte
	Hash    string // SHA-256 of Archive, hex
	Files   int
}

// Archive packs the project in dir as a gzipped tar: regular files only,
// in name order, without times or owners, so equal projects give equal
// archives.
func Archive(dir string) (Packed, error) {
	var names []string
	var total int64
	err := walkProject(dir, func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil // directories come with their files; links are not followed
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > MaxArchiveBytes {
			return fmt.Errorf("the project in %s is larger than %d MiB (without data/ and .git): too large to send as a model source", dir, MaxArchiveBytes>>20)
		}
		names = append(names, rel)
		if len(names) > maxArchiveFiles {
			return fmt.Errorf("the project in %s has more than %d files", dir, maxArchiveFiles)
		}
		return nil
	})
	if err != nil {
		return Packed{}, err
	}
	slices.Sort(names)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return Packed{}, err
	}
	tw := tar.NewWriter(zw)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return Packed{}, err
		}
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return Packed{}, err
		}
		if _, err := tw.Write(b); err != nil {
			return Packed{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return Packed{}, err
	}
	if err := zw.Close(); err != nil {
		return Packed{}, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return Packed{Archive: buf.Bytes(), Hash: hex.EncodeToString(sum[:]), Files: len(names)}, nil
}

// ArchiveError is an archive that Extract refuses.
type ArchiveError struct{ Msg string }

func (e *ArchiveError) Error() string { return "project archive: " + e.Msg }

// Extract unpacks an archive made by Archive into dir, which must be empty
// or missing. It accepts regular files only, with relative, clean names
// that stay inside dir, and at most MaxArchiveBytes unpacked; anything
// else is an *ArchiveError and leaves dir incomplete (callers use a fresh
// directory).
func Extract(archive []byte, dir string) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return &ArchiveError{"not gzip: " + err.Error()}
	}
	tr := tar.NewReader(zr)
	var total int64
	seen := map[string]bool{}
	for files := 0; ; files++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &ArchiveError{"not a tar archive: " + err.Error()}
		}
		if files >= maxArchiveFiles {
			return &ArchiveError{fmt.Sprintf("more than %d files", maxArchiveFiles)}
		}
		name := hdr.Name
		if hdr.Typeflag != tar.TypeReg {
			return &ArchiveError{fmt.Sprintf("%q is not a regular file", name)}
		}
		if name == "" || strings.ContainsRune(name, 0) || strings.Contains(name, `\`) || path.IsAbs(name) ||
			path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
			return &ArchiveError{fmt.Sprintf("%q is not a clean relative path", name)}
		}
		if seen[name] {
			return &ArchiveError{fmt.Sprintf("%q appears twice", name)}
		}
		seen[name] = true
		if hdr.Size < 0 || total+hdr.Size > MaxArchiveBytes {
			return &ArchiveError{fmt.Sprintf("unpacks to more than %d MiB", MaxArchiveBytes>>20)}
		}
		total += hdr.Size
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return &ArchiveError{fmt.Sprintf("%q: %v", name, err)}
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			// A file where a directory should be, or the reverse.
			return &ArchiveError{fmt.Sprintf("%q: %v", name, err)}
		}
		_, err = io.Copy(f, io.LimitReader(tr, hdr.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return &ArchiveError{fmt.Sprintf("%q: %v", name, err)}
		}
	}
	return nil
}
