package fs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/fs"
)

func TestSymlinkConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "current")
	withPath := invalidAt(symlink, path)
	conformance.Run(t, conformance.Case{
		Handler: fs.Symlink{},
		Desired: symlink(map[string]any{"path": path, "target": "../releases/v1"}, false),
		Updated: symlink(map[string]any{"path": path, "target": filepath.Join(dir, "releases", "v2")}, false),
		Invalid: map[string]adapters.Resource{
			"path":   withPath(dir+"/etc/./current", map[string]any{"target": "x"}),
			"target": withPath(path, map[string]any{"target": ""}),
			"mode":   withPath(path, map[string]any{"target": "x", "mode": "0777"}),
		},
		Exists: func(t testing.TB) bool {
			fi, err := os.Lstat(path)
			return err == nil && fi.Mode()&os.ModeSymlink != 0
		},
	})
}
