package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/fs"
	"github.com/intendhq/intend/internal/ledger"
)

// BenchmarkRunOneUnchangedFile is an executor's attempt on an fs::File
// already as intended, from the batch's resource to its action record
// (intend-bench's P3, less the ledger).
func BenchmarkRunOneUnchangedFile(b *testing.B) {
	dir := b.TempDir()
	reg := adapters.NewRegistry()
	fs.Register(reg)
	e := &Executor{Adapters: reg, Concurrency: 1}
	path := filepath.Join(dir, "f000042")
	if err := os.WriteFile(path, []byte("file 42\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	attrs, _ := json.Marshal(map[string]any{"path": path, "content": "file 42\n", "mode": "0644"})
	r := ledger.Resource{ID: "fs::File[bench,path=" + path + "]", Hash: make([]byte, 32), Attributes: attrs,
		Action: ledger.ActionRepair}
	batch := ledger.Batch{EnvironmentID: "env", Version: 1, Action: ledger.ActionRepair, Reason: "repair", Agent: "bench"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rec := e.runOne(ctx, batch, r, activity.Info{}, nil)
		if rec.Result != ledger.ResultDeployed || rec.Changed {
			b.Fatalf("record = %+v, want deployed and unchanged", rec)
		}
	}
}

// BenchmarkDecodeBatch100 decodes a batch of 100 fs::File resources as an
// executor receives it from the executor API.
func BenchmarkDecodeBatch100(b *testing.B) {
	batch := ledger.Batch{EnvironmentID: "0190a5d2-7b0e-7d3a-9c1e-2f4b6a8c0d1e", Version: 3, Action: ledger.ActionRepair,
		Reason: "repair", Agent: "bench"}
	for i := range 100 {
		p := fmt.Sprintf("/srv/bench/d%02d/f%06d", i%100, i)
		attrs, _ := json.Marshal(map[string]any{"path": p, "content": fmt.Sprintf("file %d\n", i), "mode": "0644"})
		batch.Resources = append(batch.Resources, ledger.Resource{ID: "fs::File[bench,path=" + p + "]",
			Hash: make([]byte, 32), Attributes: attrs, Action: ledger.ActionRepair})
	}
	body, err := json.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var got ledger.Batch
		if err := json.Unmarshal(body, &got); err != nil || len(got.Resources) != 100 {
			b.Fatalf("decoded %d resources, %v", len(got.Resources), err)
		}
	}
}

// TestRunOneUnchangedFileAllocations bounds what an executor allocates
// for an attempt on an unchanged fs::File (issue 28: garbage collection
// was a fifth of intend's CPU): 63 objects and 69 KiB before, of which
// 11 objects in decoding the attributes through reflection and 64 KiB in
// the adapter's read buffer; 40 objects and 3.3 KiB since.
func TestRunOneUnchangedFileAllocations(t *testing.T) {
	dir := t.TempDir()
	reg := adapters.NewRegistry()
	fs.Register(reg)
	e := &Executor{Adapters: reg, Concurrency: 1}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("file 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := ledger.Resource{ID: "fs::File[bench,path=" + path + "]", Hash: make([]byte, 32),
		Attributes: json.RawMessage(`{"path":"` + path + `","content":"file 42\n","mode":"0644"}`), Action: ledger.ActionRepair}
	batch := ledger.Batch{EnvironmentID: "env", Version: 1, Action: ledger.ActionRepair, Reason: "repair", Agent: "bench"}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if rec := e.runOne(ctx, batch, r, activity.Info{}, nil); rec.Result != ledger.ResultDeployed || rec.Changed {
			t.Fatalf("record = %+v, want deployed and unchanged", rec)
		}
	})
	if allocs > 45 {
		t.Errorf("an attempt on an unchanged file allocates %v objects, want at most 45", allocs)
	}
}
