package modules

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// TreeDigest is the SHA-256 of a module's content: of the listing
// `sha256sum` prints for its files, sorted by slash path, with .git left
// out, as "sha256:<hex>". Reproduce it with
//
//	find . -type f ! -path './.git/*' | LC_ALL=C sort | xargs sha256sum | sha256sum
//
// (paths start with "./" there and in the listing). A symbolic link or
// anything but a directory or a regular file is refused: what a link
// points to is not the module's.
func TreeDigest(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file (a module holds directories and files only)", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, "./"+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	var listing strings.Builder
	for _, f := range files {
		d, err := FileDigest(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&listing, "%s  %s\n", strings.TrimPrefix(d, "sha256:"), f)
	}
	sum := sha256.Sum256([]byte(listing.String()))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// FileDigest is the SHA-256 of a file, as "sha256:<hex>".
func FileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
