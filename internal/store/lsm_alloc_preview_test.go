package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestPreviewAllocation: a create's dry-run sees the values the create
// would be given (the lowest free of each pool, as allocate chooses
// them), takes none of them (the pools' usage is unchanged, and the
// create that follows gets the same values), waits for no lock (a
// create holding a pool row does not hold it up), and an exhausted pool
// answers the create's *PoolExhaustedError.
func TestPreviewAllocation(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	// VLAN 4090–4091: two values; a /29 of /30s: two.
	if _, err := st.PutModel(ctx, e.ID, linkModel("a", linkPools(4091, "10.1.0.0/29"))); err != nil {
		t.Fatal(err)
	}
	preview := func() ([]store.PreviewedValue, error) {
		return st.PreviewAllocation(ctx, e.ID, "link", 0, map[string]any{"name": "l"})
	}
	want := []store.PreviewedValue{{"asn", "asn", int64(64512)}, {"subnet", "p2p", "10.1.0.0/30"}, {"vlan", "vlan", int64(4090)}}
	got, err := preview()
	if err != nil || mustJSON(t, got) != mustJSON(t, want) {
		t.Fatalf("preview: %+v, %v; want %+v", got, err, want)
	}
	before := poolUsage(t, st, e.ID)
	if again, err := preview(); err != nil || mustJSON(t, again) != mustJSON(t, want) {
		t.Errorf("a second preview: %+v, %v", again, err)
	}
	if u := poolUsage(t, st, e.ID); u["vlan"] != [3]int64{2, 0, 2} || u["p2p"] != before["p2p"] || u["asn"] != before["asn"] {
		t.Errorf("the previews took values: %v", u)
	}
	applied, err := createLink(ctx, st, e.ID, newLinkID(), "l0")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range want {
		if mustJSON(t, applied.Instance.Candidate[v.Attribute]) != mustJSON(t, v.Value) {
			t.Errorf("the create after the preview got %s = %v, the preview showed %v", v.Attribute,
				applied.Instance.Candidate[v.Attribute], v.Value)
		}
	}
	// The next free values now; a value the candidate set has (a
	// migration's) is not chosen again.
	got, err = st.PreviewAllocation(ctx, e.ID, "link", 0, map[string]any{"name": "m", "asn": 65000})
	if want := []store.PreviewedValue{{"subnet", "p2p", "10.1.0.4/30"}, {"vlan", "vlan", int64(4091)}}; err != nil ||
		mustJSON(t, got) != mustJSON(t, want) {
		t.Errorf("preview after a create, with asn given: %+v, %v; want %+v", got, err, want)
	}

	// A create holding the pools' rows (as allocate does, until its
	// transaction ends) does not hold the preview up.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `select 1 from lsm_pools where environment_id = $1::uuid for update`, e.ID); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err = st.PreviewAllocation(short, e.ID, "link", 0, map[string]any{"name": "m"})
	if err != nil || len(got) != 3 || got[2].Value != int64(4091) {
		t.Errorf("preview while a create holds the pools: %+v, %v", got, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// The second create takes the last /30: the next preview is refused
	// as the create would be, naming the pool.
	if _, err := createLink(ctx, st, e.ID, newLinkID(), "l1"); err != nil {
		t.Fatal(err)
	}
	before = poolUsage(t, st, e.ID)
	_, err = preview()
	var pe *store.PoolExhaustedError
	var ce *store.ConflictError
	if !errors.As(err, &pe) || pe.Pool != "p2p" || !errors.As(err, &ce) ||
		!strings.Contains(ce.What, "pool p2p (cidr 10.1.0.0/29 by /30) is exhausted") {
		t.Errorf("preview on an exhausted pool: %v", err)
	}
	if u := poolUsage(t, st, e.ID); mustJSON(t, u) != mustJSON(t, before) {
		t.Errorf("the refused preview changed the pools: %v, before %v", u, before)
	}
	// An entity that allocates nothing previews nothing.
	if _, err := st.PutModel(ctx, e.ID, store.NewModel{Hash: "b", Archive: []byte("archive b"), Files: 1, Origin: "cli",
		Entities: []lsm.Entity{linkEntity(), {Name: "plain", Lifecycle: lsm.Simple(),
			Attributes: []lsm.AttributeSpec{{Name: "name", Modifier: lsm.ReadWrite}}}},
		Pools: linkPools(4091, "10.1.0.0/29")}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.PreviewAllocation(ctx, e.ID, "plain", 0, map[string]any{"name": "p"}); err != nil || len(got) != 0 {
		t.Errorf("preview of an entity without pools: %+v, %v", got, err)
	}
}
