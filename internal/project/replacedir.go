package project

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// ReplaceDir makes dir hold exactly files (by slash path, relative to
// dir): it writes them into a new directory beside dir and swaps it in,
// so that a reader (an editor's cue lsp) never sees half of them. It is
// how intend writes the copies of CUE packages under cue.mod/pkg.
func ReplaceDir(dir string, files map[string][]byte) error {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for rel, b := range files {
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	old := dir + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return os.RemoveAll(old)
}
