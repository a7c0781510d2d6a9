package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// TestBatchHeadReadsTheResourcesAskedAbout checks that the head a chunk
// of records is checked against holds the hashes of the chunk's
// resources only, not of the whole batch (issue 28: each POST of 100
// records read the ids and hashes of thousands), and that an id outside
// the batch is missing from it.
func TestBatchHeadReadsTheResourcesAskedAbout(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	var body strings.Builder
	body.WriteString(`{"resources":[`)
	for i := range 300 {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"id":"fs::File[a,path=/f%d]","attributes":{"path":"/f%d","content":"x"}}`, i, i)
	}
	v, err := intent.DecodeBytes([]byte(body.String() + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	run := startRun(t, st, e.ID, v)
	p, err := st.PlanDeploy(ctx, e.ID, run.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || len(p.Batches) != 1 {
		t.Fatalf("plan = %+v, %v; want one batch", p, err)
	}
	b, err := st.LoadBatch(ctx, e.ID, run.Run, p.Batches[0].Seq)
	if err != nil || len(b.Resources) != 300 {
		t.Fatalf("batch of %d resources, %v", len(b.Resources), err)
	}
	hashes := map[string][]byte{}
	for _, r := range b.Resources {
		hashes[r.ID] = r.Hash
	}

	asked := []string{"fs::File[a,path=/f7]", "fs::File[a,path=/f299]", "fs::File[a,path=/nope]"}
	h, err := st.BatchHead(ctx, e.ID, run.Run, p.Batches[0].Seq, asked)
	if err != nil {
		t.Fatal(err)
	}
	if h.Agent != "a" || h.Version != b.Version || h.Action != b.Action {
		t.Errorf("head = %s %d %s, want a %d %s", h.Agent, h.Version, h.Action, b.Version, b.Action)
	}
	if len(h.Hashes) != 2 {
		t.Errorf("head has %d hashes, want the 2 of the resources asked about that are in the batch", len(h.Hashes))
	}
	for _, id := range asked[:2] {
		if got, ok := h.Hashes[id]; !ok || !bytes.Equal(got, hashes[id]) {
			t.Errorf("hash of %s = %x, want %x", id, got, hashes[id])
		}
	}
	if h, err := st.BatchHead(ctx, e.ID, run.Run, p.Batches[0].Seq, nil); err != nil || h.Agent != "a" || len(h.Hashes) != 0 {
		t.Errorf("head asked about nothing = agent %q, %d hashes, %v; want the head and no hashes", h.Agent, len(h.Hashes), err)
	}
	if _, err := st.BatchHead(ctx, e.ID, run.Run, 999, asked); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("head of a missing batch: %v, want not found", err)
	}
}
