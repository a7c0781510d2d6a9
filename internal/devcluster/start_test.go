package devcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/internal/devcluster"
)

// TestStartFailsCleanly: a cluster that cannot start returns its error
// and no cluster (it once panicked stopping the nil cluster instead,
// hiding the error). Here PostgreSQL's directory is a file.
func TestStartFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "postgres"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := devcluster.Start(context.Background(), devcluster.Options{Dir: dir})
	if err == nil || c != nil {
		t.Fatalf("Start = %v, %v; want an error and no cluster", c, err)
	}
}
