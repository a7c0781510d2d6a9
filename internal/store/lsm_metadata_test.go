package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// Metadata writes merge, remove and replace keys without a transfer: the
// instance's version, state, sets, last update and log stay as they were.
func TestInstanceMetadata(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	web, db := liveWebDeletedDB(t, st, e)
	before, err := st.GetInstance(ctx, e.ID, "vm", web)
	if err != nil {
		t.Fatal(err)
	}
	if before.Metadata != nil {
		t.Fatalf("a new instance has metadata %v", before.Metadata)
	}
	write := func(ref string, set map[string]any, remove []string, replace bool, want map[string]any) {
		t.Helper()
		inst, err := st.WriteInstanceMetadata(ctx, e.ID, "vm", ref, set, remove, replace)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.GetInstance(ctx, e.ID, "vm", web)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []store.ServiceInstance{inst, got} {
			if !reflect.DeepEqual(i.Metadata, want) {
				t.Errorf("metadata = %v, want %v", i.Metadata, want)
			}
			if i.Version != before.Version || i.State != before.State || !reflect.DeepEqual(i.Sets, before.Sets) ||
				!i.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("a metadata write changed the instance: %+v, was %+v", i, before)
			}
		}
	}
	write(web, map[string]any{"owner": "ops", "ticket": map[string]any{"id": 7.0, "tags": []any{"a", nil}}}, nil, false,
		map[string]any{"owner": "ops", "ticket": map[string]any{"id": 7.0, "tags": []any{"a", nil}}})
	// By identity; a merge replaces the keys it names, removes the ones
	// it is told to, and keeps the others.
	write("web", map[string]any{"owner": "dev", "cost": 3.5}, []string{"ticket", "absent"}, false,
		map[string]any{"owner": "dev", "cost": 3.5})
	write(web, map[string]any{"only": true}, nil, true, map[string]any{"only": true})
	write(web, nil, []string{"only"}, false, nil)
	log, err := st.InstanceLog(ctx, e.ID, web)
	if err != nil || len(log) != 1 {
		t.Fatalf("log = %v, %v; want the create only", log, err)
	}

	// Too large: refused, nothing written.
	write(web, map[string]any{"keep": 1.0}, nil, false, map[string]any{"keep": 1.0})
	_, err = st.WriteInstanceMetadata(ctx, e.ID, "vm", web, map[string]any{"big": strings.Repeat("x", store.MaxMetadataBytes)}, nil, false)
	var tl *store.MetadataTooLargeError
	if !errors.As(err, &tl) || tl.Bytes <= store.MaxMetadataBytes {
		t.Fatalf("a write above the limit: %v", err)
	}
	write(web, nil, nil, false, map[string]any{"keep": 1.0})

	// A deleted instance, another entity's, or none: not found.
	for _, ref := range []string{db, "nobody", "8f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"} {
		if _, err := st.WriteInstanceMetadata(ctx, e.ID, "vm", ref, map[string]any{"a": 1.0}, nil, false); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("metadata of %s: %v, want not found", ref, err)
		}
	}
	if _, err := st.WriteInstanceMetadata(ctx, e.ID, "other", web, map[string]any{"a": 1.0}, nil, false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("metadata through another entity: %v, want not found", err)
	}
	// The inventory list shows them.
	list, err := st.ListInstances(ctx, e.ID, "vm", "", false, "", 10)
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Metadata, map[string]any{"keep": 1.0}) {
		t.Errorf("list = %+v, %v", list, err)
	}
}

// Metadata writes and transfers of one instance at the same time: every
// transfer is written with its sets, and every metadata key written
// stays; neither overwrites the other.
func TestInstanceMetadataWithTransfers(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	web, _ := liveWebDeletedDB(t, st, e)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for v := int64(2); v <= n+1; v++ {
			_, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: web, Version: v,
				Identity: "web", State: "start", Sets: lsm.Sets{Candidate: map[string]any{"name": "x", "memory": float64(v)}},
				Event: json.RawMessage(`{"trigger": "on_update"}`)})
			if err != nil {
				errs <- err
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range n {
			if _, err := st.WriteInstanceMetadata(ctx, e.ID, "vm", web, map[string]any{fmt.Sprint("k", i): float64(i)}, nil, false); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := st.GetInstance(ctx, e.ID, "vm", web)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != n+1 || got.Candidate["memory"] != float64(n+1) {
		t.Errorf("instance at version %d with %v, want version %d", got.Version, got.Candidate, n+1)
	}
	if len(got.Metadata) != n {
		t.Errorf("metadata has %d keys, want %d: %v", len(got.Metadata), n, got.Metadata)
	}
	log, err := st.InstanceLog(ctx, e.ID, web)
	if err != nil || len(log) != n+1 {
		t.Errorf("log has %d versions, want %d (%v)", len(log), n+1, err)
	}
}
