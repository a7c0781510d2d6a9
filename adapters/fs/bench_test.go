package fs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
)

// BenchmarkFileUnchanged is a repair's attempt on a file already as
// intended (intend-bench's P3): validate, observe, diff, facts.
func BenchmarkFileUnchanged(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	const content = "file 4242\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	res := file(map[string]any{"path": path, "content": content, "mode": "0644"}, false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		hc := adapters.NewContext()
		out, err := adapters.Run(ctx, fs.File{}, hc, res, false)
		if err != nil || out.Changed {
			b.Fatalf("Run = %+v, %v; want unchanged", out, err)
		}
		hc.Close()
	}
}

// BenchmarkFileCreate is a first deploy's attempt on a file that does not
// exist yet (intend-bench's P1), in a directory that does.
func BenchmarkFileCreate(b *testing.B) {
	dir := b.TempDir()
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		res := file(map[string]any{"path": filepath.Join(dir, fmt.Sprintf("f%07d", i)), "content": "file\n", "mode": "0644"}, false)
		i++
		hc := adapters.NewContext()
		out, err := adapters.Run(ctx, fs.File{}, hc, res, false)
		if err != nil || out.Action != adapters.OpCreate {
			b.Fatalf("Run = %+v, %v; want a create", out, err)
		}
		hc.Close()
	}
}
