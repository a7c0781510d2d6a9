package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestAllocateForVersion: a migration's candidate set gets the values of
// its version's allocated attributes: one the instance holds under the
// same name stays, one a renamed attribute carries over (held under the
// old name) stays, a new one is taken from its pool and recorded; a
// retry takes nothing more; an attribute whose version allocates it
// from another pool than the one it holds a value of is a conflict, and
// so is an exhausted pool, neither taking anything.
func TestAllocateForVersion(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	attr := func(name, pool string) lsm.AttributeSpec {
		return lsm.AttributeSpec{Name: name, Modifier: lsm.ReadOnly, Schema: json.RawMessage(`{"type": "integer"}`), Allocate: pool}
	}
	nameAttr := lsm.AttributeSpec{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true}
	v1 := lsm.Entity{Name: "link", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{nameAttr, attr("vlan", "vlan"), attr("tag", "vlan")}}
	// Version 2: tag renamed vid (same pool), vlan kept, asn added.
	v2 := lsm.Entity{Name: "link", Version: 2, Lifecycle: lsm.Simple(),
		Attributes: []lsm.AttributeSpec{nameAttr, attr("vlan", "vlan"), attr("vid", "vlan"), attr("asn", "asn")}}
	// Version 3: vlan from the asn pool.
	v3 := lsm.Entity{Name: "link", Version: 3, Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{nameAttr, attr("vlan", "asn")}}
	pools := []lsm.Pool{{Name: "asn", Kind: lsm.PoolRange, From: 64512, To: 64513}, {Name: "vlan", Kind: lsm.PoolVLAN, From: 100, To: 109}}
	if _, err := st.PutModel(ctx, e.ID, store.NewModel{Hash: "m", Archive: []byte("m"), Files: 1, Origin: "cli",
		Entities: []lsm.Entity{v1, v2, v3}, Pools: pools}); err != nil {
		t.Fatal(err)
	}
	ids := []string{newLinkID(), newLinkID()}
	var held []map[string]any
	for i, id := range ids {
		a, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "link", ID: id, Version: 1, State: "start",
			Sets: lsm.Sets{Candidate: map[string]any{"name": fmt.Sprint("l", i)}, CandidateVersion: 1}})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, a.Instance.Candidate)
		// Two attributes of one pool get two values (the create's
		// allocation once gave both the same one, and failed on the key).
		if c := a.Instance.Candidate; c["vlan"] == nil || c["tag"] == nil || fmt.Sprint(c["vlan"]) == fmt.Sprint(c["tag"]) {
			t.Errorf("create %d: vlan %v and tag %v, want two values of pool vlan", i, c["vlan"], c["tag"])
		}
	}
	used := func() string {
		t.Helper()
		ps, err := st.ListPools(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s=%d", p.Name, p.Used))
		}
		return strings.Join(out, " ")
	}
	if u := used(); u != "asn=0 vlan=4" {
		t.Fatalf("after two creates: %s", u)
	}
	// The migration mapped tag to vid and left the r attributes out;
	// a value the migration made up for vlan is not the instance's.
	cand := map[string]any{"name": "l0", "vid": held[0]["tag"], "vlan": 109}
	for try := range 2 {
		got, err := st.AllocateForVersion(ctx, e.ID, "link", ids[0], 2, cand)
		if err != nil {
			t.Fatalf("try %d: %v", try, err)
		}
		if fmt.Sprint(got["vlan"]) != fmt.Sprint(held[0]["vlan"]) || fmt.Sprint(got["vid"]) != fmt.Sprint(held[0]["tag"]) ||
			fmt.Sprint(got["asn"]) != "64512" || got["name"] != "l0" {
			t.Errorf("try %d: %v, want vlan %v, vid %v (tag's), asn 64512", try, got, held[0]["vlan"], held[0]["tag"])
		}
		if u := used(); u != "asn=1 vlan=4" {
			t.Errorf("try %d: pools %s, want one asn taken and no vlan", try, u)
		}
	}
	if cand["asn"] != nil {
		t.Errorf("the caller's set was changed: %v", cand)
	}
	// Version 3 allocates vlan from asn: the instance holds a vlan one.
	_, err := st.AllocateForVersion(ctx, e.ID, "link", ids[1], 3, map[string]any{"name": "l1"})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "holds value") {
		t.Errorf("another pool for a held attribute: %v", err)
	}
	// The second instance's asn takes the last one; a third would not
	// find one (the first instance holds the other).
	if _, err := st.AllocateForVersion(ctx, e.ID, "link", ids[1], 2, map[string]any{"name": "l1"}); err != nil {
		t.Fatal(err)
	}
	third := newLinkID()
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "link", ID: third, Version: 1, State: "start",
		Sets: lsm.Sets{Candidate: map[string]any{"name": "l2"}, CandidateVersion: 1}}); err != nil {
		t.Fatal(err)
	}
	var pe *store.PoolExhaustedError
	if _, err := st.AllocateForVersion(ctx, e.ID, "link", third, 2, map[string]any{"name": "l2"}); !errors.As(err, &pe) || pe.Pool != "asn" {
		t.Errorf("an exhausted pool: %v", err)
	}
	// Six vlan values for the creates, and one for the second
	// instance's vid, which its migration did not map from tag.
	if u := used(); u != "asn=2 vlan=7" {
		t.Errorf("at the end: pools %s", u)
	}
}
