package fs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/fs"
)

func TestDirectoryConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "srv", "data")
	withPath := invalidAt(directory, path)
	conformance.Run(t, conformance.Case{
		Handler: fs.Directory{},
		Desired: directory(map[string]any{"path": path, "mode": "0750"}, false),
		Updated: directory(map[string]any{"path": path, "mode": "0700"}, false),
		Invalid: map[string]adapters.Resource{
			"path":  withPath(dir+"/srv/./data", map[string]any{}),
			"mode":  withPath(path, map[string]any{"mode": "750"}),
			"owner": withPath(path, map[string]any{"owner": "no such user"}),
			"group": withPath(path, map[string]any{"group": 0.0}),
		},
		Exists: func(t testing.TB) bool {
			fi, err := os.Lstat(path)
			return err == nil && fi.IsDir()
		},
	})
}
