package fs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

// TestFileFacts checks that File reports the size and mtime of the file on
// disk: none before it exists, the written file's after Create and Update.
func TestFileFacts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.txt")
	steps := []struct {
		name    string
		content string
		dryRun  bool
		size    int64 // -1: no facts
	}{
		{"dry-run of a missing file has no facts", "alpha\n", true, -1},
		{"create reports the written file", "alpha\n", false, 6},
		{"update reports the new size", "alpha v2\n", false, 9},
		{"no-op reports what it observed", "alpha v2\n", false, 9},
	}
	for _, s := range steps {
		hc := adapters.NewContext()
		res := file(map[string]any{"path": path, "content": s.content}, false)
		if _, err := adapters.Run(context.Background(), fs.File{}, hc, res, s.dryRun); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		facts := hc.Facts()
		if s.size < 0 {
			if len(facts) != 0 {
				t.Errorf("%s: facts = %v, want none", s.name, facts)
			}
			continue
		}
		if facts["size"] != s.size {
			t.Errorf("%s: size = %v (%T), want %d", s.name, facts["size"], facts["size"], s.size)
		}
		mtime, ok := facts["mtime"].(string)
		if _, err := time.Parse(time.RFC3339, mtime); !ok || err != nil {
			t.Errorf("%s: mtime = %v, want an RFC 3339 time", s.name, facts["mtime"])
		}
	}
}
