//go:build !linux

package fs

import (
	iofs "io/fs"
	"os"

	"github.com/intendhq/intend/adapters/internal/fsys"
)

// openRead opens path for reading.
func openRead(path string) (fsys.ReadFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// createExcl creates path (which must not exist) for writing, mode 0600.
func createExcl(path string) (fsys.WriteFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// sameFile is os.SameFile.
func sameFile(a, b iofs.FileInfo) bool { return os.SameFile(a, b) }
