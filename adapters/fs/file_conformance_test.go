package fs_test

import (
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/fs"
)

// TestFileConformance runs the adapter conformance suite for fs::File in a
// temporary directory; Exists looks at the disk itself, not through File.
func TestFileConformance(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "etc", "motd")
	conformance.Run(t, conformance.Case{
		Handler: fs.File{},
		Desired: file(map[string]any{"path": path, "content": "hello\n", "mode": "0640", "owner": "root", "group": "0"}, false),
		Updated: file(map[string]any{"path": path, "content": "hello, world\n", "mode": "0600", "owner": "daemon", "group": "daemon"}, false),
		Invalid: map[string]adapters.Resource{
			// Relative paths would depend on the executor's working directory.
			"path": file(map[string]any{"path": "etc/motd", "content": "hello\n"}, false),
			// "999" is neither four digits nor octal.
			"mode": file(map[string]any{"path": path, "content": "hello\n", "mode": "999"}, false),
			// The hash of other content.
			"content_hash": file(map[string]any{"path": path, "content": "hello\n", "content_hash": sha("hello")}, false),
			// Not a name.
			"owner": file(map[string]any{"path": path, "content": "hello\n", "owner": "root:root"}, false),
		},
		Exists: conformance.PathExists(path),
	})
}
