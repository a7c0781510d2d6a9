package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// linkEntity is an entity whose attributes vlan, subnet and asn are
// allocated from the pools of the same names.
func linkEntity() lsm.Entity {
	return lsm.Entity{Name: "link", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true},
		{Name: "vlan", Modifier: lsm.ReadOnly, Schema: json.RawMessage(`{"type": "integer"}`), Allocate: "vlan"},
		{Name: "subnet", Modifier: lsm.ReadOnly, Schema: json.RawMessage(`{"type": "string"}`), Allocate: "p2p"},
		{Name: "asn", Modifier: lsm.ReadOnly, Schema: json.RawMessage(`{"type": "integer"}`), Allocate: "asn"},
	}}
}

func linkPools(vlanTo int64, prefix string) []lsm.Pool {
	return []lsm.Pool{
		{Name: "asn", Kind: lsm.PoolRange, From: 64512, To: 65534},
		{Name: "p2p", Kind: lsm.PoolCIDR, Prefix: prefix, Size: 30},
		{Name: "vlan", Kind: lsm.PoolVLAN, From: 4090, To: vlanTo},
	}
}

// linkModel is a model source named hash with the link entity and pools.
func linkModel(hash string, pools []lsm.Pool) store.NewModel {
	return store.NewModel{Hash: hash, Archive: []byte("archive " + hash), Files: 1, Origin: "cli",
		Entities: []lsm.Entity{linkEntity()}, Pools: pools}
}

// createLink writes version 1 of a link instance (as the lifecycle's
// create does) and returns what the store wrote.
func createLink(ctx context.Context, st *store.Store, envID, id, name string) (store.AppliedChange, error) {
	return st.ApplyInstanceChange(ctx, envID, createChange(id, name))
}

var linkIDs atomic.Int64

// newLinkID is an instance id not used before in the test binary.
func newLinkID() string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", linkIDs.Add(1)) }

func createChange(id, name string) store.InstanceChange {
	return store.InstanceChange{Entity: "link", ID: id, Version: 1, State: "start",
		Sets: lsm.Sets{Candidate: map[string]any{"name": name}}}
}

// terminate moves an instance to terminated at version 2 (deleted).
func terminate(ctx context.Context, st *store.Store, envID string, inst store.ServiceInstance) error {
	_, err := st.ApplyInstanceChange(ctx, envID, store.InstanceChange{Entity: "link", ID: inst.ID, Version: inst.Version + 1,
		State: "terminated", Deleted: true, Sets: inst.Sets})
	return err
}

// TestAllocation: a create gets the lowest free value of each pool in its
// candidate set (and log); a CIDR pool's values are aligned subnets of the
// pool's size; a retried create allocates nothing more; an exhausted pool
// refuses the create and writes nothing; a terminated instance's values
// are free again and go to the next create, lowest first.
func TestAllocation(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	// VLAN 4090–4094: five values; a /28 of /30s: four.
	if _, err := st.PutModel(ctx, e.ID, linkModel("a", linkPools(4094, "10.1.0.0/28"))); err != nil {
		t.Fatal(err)
	}
	var insts []store.ServiceInstance
	for i := range 4 {
		applied, err := createLink(ctx, st, e.ID, newLinkID(), fmt.Sprintf("l%d", i))
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		c := applied.Instance.Candidate
		want := map[string]any{"name": fmt.Sprintf("l%d", i), "vlan": float64(4090 + i), "subnet": fmt.Sprintf("10.1.0.%d/30", 4*i), "asn": float64(64512 + i)}
		if got, _ := json.Marshal(c); string(got) != mustJSON(t, want) {
			t.Errorf("create %d: candidate %s, want %s", i, got, mustJSON(t, want))
		}
		log, err := st.InstanceLog(ctx, e.ID, applied.Instance.ID)
		if err != nil || len(log) != 1 || mustJSON(t, log[0].Candidate) != mustJSON(t, want) {
			t.Errorf("create %d: log %+v, %v", i, log, err)
		}
		insts = append(insts, applied.Instance)
	}
	// A retry of the last create finds it written: nothing allocated.
	retry, err := st.ApplyInstanceChange(ctx, e.ID, createChange(insts[3].ID, "l3"))
	if err != nil || retry.Written || retry.Instance.Candidate["vlan"] != float64(4093) {
		t.Fatalf("retry: %+v, %v", retry, err)
	}
	usage := poolUsage(t, st, e.ID)
	if usage["vlan"] != [3]int64{5, 4, 1} || usage["p2p"] != [3]int64{4, 4, 0} || usage["asn"] != [3]int64{1023, 4, 1019} {
		t.Errorf("usage after 4 creates and a retry: %v", usage)
	}
	// The /28 is exhausted: a fifth create is refused, naming the pool,
	// and writes nothing (not even the VLAN it would have taken).
	fifth := newLinkID()
	_, err = createLink(ctx, st, e.ID, fifth, "l4")
	var ce *store.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.What, "pool p2p (cidr 10.1.0.0/28 by /30) is exhausted") || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create on an exhausted pool: %v", err)
	}
	if _, err := st.GetInstance(ctx, e.ID, "link", fifth); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused create was written: %v", err)
	}
	if u := poolUsage(t, st, e.ID); u["vlan"] != usage["vlan"] {
		t.Errorf("the refused create took a VLAN: %v", u)
	}
	// Terminating the second frees its values: the next create gets them
	// (the lowest free), not the next ones up.
	if err := terminate(ctx, st, e.ID, insts[1]); err != nil {
		t.Fatal(err)
	}
	if u := poolUsage(t, st, e.ID); u["p2p"] != [3]int64{4, 3, 1} {
		t.Errorf("usage after the termination: %v", u)
	}
	again, err := createLink(ctx, st, e.ID, fifth, "l4")
	if err != nil {
		t.Fatal(err)
	}
	if c := again.Instance.Candidate; c["vlan"] != float64(4091) || c["subnet"] != "10.1.0.4/30" || c["asn"] != float64(64513) {
		t.Errorf("after a release: %v, want the released values", c)
	}
	// The pool's allocations, by value.
	_, allocs, more, err := st.GetPool(ctx, e.ID, "p2p", "", 2)
	if err != nil || !more || len(allocs) != 2 || allocs[0].Value != "10.1.0.0/30" || allocs[1].Value != "10.1.0.4/30" ||
		allocs[1].InstanceID != fifth || allocs[1].Attribute != "subnet" || allocs[1].Entity != "link" {
		t.Errorf("allocations of p2p: %+v, more %v, %v", allocs, more, err)
	}
	if _, allocs, more, err := st.GetPool(ctx, e.ID, "p2p", "10.1.0.4/30", 10); err != nil || more || len(allocs) != 2 || allocs[0].Value != "10.1.0.8/30" {
		t.Errorf("allocations of p2p after 10.1.0.4/30: %+v, more %v, %v", allocs, more, err)
	}
	if _, _, _, err := st.GetPool(ctx, e.ID, "p2p", "10.1.0.5/30", 10); !errors.As(err, new(*store.PoolValueError)) {
		t.Errorf("after a misaligned subnet: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// poolUsage is each pool's values, used and free.
func poolUsage(t *testing.T, st *store.Store, envID string) map[string][3]int64 {
	t.Helper()
	ps, err := st.ListPools(context.Background(), envID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][3]int64{}
	for _, p := range ps {
		out[p.Name] = [3]int64{p.Values, p.Used, p.Free}
	}
	return out
}

// TestPoolChanges: a model that removes a pool live instances hold values
// of, or shrinks one below them, or allocates an attribute live instances
// have no value for, is refused like the other breaking changes (staged
// or not), and changes nothing; a change that keeps every
// held value is fine, and so is removing a pool nobody holds values of.
func TestPoolChanges(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	if _, err := st.PutModel(ctx, e.ID, linkModel("a", linkPools(4094, "10.1.0.0/28"))); err != nil {
		t.Fatal(err)
	}
	applied, err := createLink(ctx, st, e.ID, newLinkID(), "l0") // vlan 4090, 10.1.0.0/30
	if err != nil {
		t.Fatal(err)
	}
	id := applied.Instance.ID
	withoutVLAN := linkModel("b", linkPools(4094, "10.1.0.0/28")[:2])
	withoutVLAN.Entities[0].Attributes = withoutVLAN.Entities[0].Attributes[:3]
	shifted := linkPools(4094, "10.1.0.0/28")
	shifted[2].From = 4091
	newAttr := linkModel("b", linkPools(4094, "10.1.0.0/28"))
	newAttr.Entities[0].Attributes = append(newAttr.Entities[0].Attributes,
		lsm.AttributeSpec{Name: "port", Modifier: lsm.ReadOnly, Schema: json.RawMessage(`{"type": "integer"}`), Allocate: "asn"})
	for _, c := range []struct {
		why    string
		model  store.NewModel
		change string
	}{
		{"the vlan pool removed", withoutVLAN, "removed_pool"},
		{"the vlan pool starts above the held value", linkModel("b", shifted), "shrunk_pool"},
		{"the /30s of another prefix", linkModel("b", linkPools(4094, "10.2.0.0/28")), "shrunk_pool"},
		{"an allocated attribute live instances lack", newAttr, "unallocated_attribute"},
	} {
		for _, stage := range []bool{false, true} {
			c.model.Stage = stage
			_, err := st.PutModel(ctx, e.ID, c.model)
			be, ok := errors.AsType[*store.BreakingChangesError](err)
			if !ok || !slices.ContainsFunc(be.Changes, func(b store.BreakingChange) bool {
				return b.Change == c.change && b.Entity == "link" && b.Pool != "" && slices.Equal(b.Instances, []string{id})
			}) {
				t.Errorf("%s (stage %v): %v, want %s", c.why, stage, err, c.change)
			}
		}
	}
	if u := poolUsage(t, st, e.ID); u["vlan"] != [3]int64{5, 1, 4} || u["p2p"] != [3]int64{4, 1, 3} {
		t.Errorf("pools after the refusals: %v", u)
	}
	// Widening keeps every held value: fine.
	wider := linkPools(4094, "10.1.0.0/16")
	wider[2].From = 1
	if _, err := st.PutModel(ctx, e.ID, linkModel("c", wider)); err != nil {
		t.Fatalf("a wider pool: %v", err)
	}
	if u := poolUsage(t, st, e.ID); u["vlan"] != [3]int64{4094, 1, 4093} || u["p2p"] != [3]int64{16384, 1, 16383} {
		t.Errorf("pools after widening: %v", u)
	}
	// Once the instance is terminated, its pools may go.
	if err := terminate(ctx, st, e.ID, applied.Instance); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutModel(ctx, e.ID, withoutVLAN); err != nil {
		t.Fatalf("removing a pool nobody holds: %v", err)
	}
	if u := poolUsage(t, st, e.ID); len(u) != 2 {
		t.Errorf("pools after removing vlan: %v", u)
	}
}

// TestAllocationReplicas: two replicas (two Stores on one database)
// creating instances at once from a small pool give every value once,
// and exactly as many creates succeed as the pool has values; the others
// are refused as exhausted.
func TestAllocationReplicas(t *testing.T) {
	t.Parallel()
	a, b, e := twoReplicas(t)
	ctx := context.Background()
	// vlan 4090–4094: 5 values, the smallest of the three pools.
	if _, err := a.PutModel(ctx, e.ID, linkModel("a", linkPools(4094, "10.1.0.0/24"))); err != nil {
		t.Fatal(err)
	}
	const creates = 24
	var wg sync.WaitGroup
	results := make([]error, creates)
	got := make([]map[string]any, creates)
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if i%2 == 1 {
				st = b
			}
			applied, err := createLink(ctx, st, e.ID, newLinkID(), fmt.Sprintf("l%d", i))
			results[i], got[i] = err, applied.Instance.Candidate
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	ok := 0
	for i, err := range results {
		var ce *store.ConflictError
		switch {
		case err == nil:
			ok++
			for _, attr := range []string{"vlan", "subnet", "asn"} {
				seen[fmt.Sprintf("%s=%v", attr, got[i][attr])]++
			}
		case errors.As(err, &ce) && strings.Contains(ce.What, "pool vlan (vlan 4090–4094) is exhausted"):
		default:
			t.Errorf("create %d: %v", i, err)
		}
	}
	if ok != 5 {
		t.Errorf("%d creates succeeded, want 5 (the VLAN pool's values)", ok)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s given %d times", v, n)
		}
	}
	for i := range 5 {
		if seen[fmt.Sprintf("vlan=%d", 4090+i)] != 1 || seen[fmt.Sprintf("subnet=10.1.0.%d/30", 4*i)] != 1 {
			t.Errorf("not the lowest values: %v", seen)
			break
		}
	}
	if u := poolUsage(t, a, e.ID); u["vlan"] != [3]int64{5, 5, 0} || u["asn"][1] != 5 {
		t.Errorf("usage: %v", u)
	}
}

// TestAllocationTakesTheLowestFreeValue: through a random run of creates
// and terminations, and a change of the pools that frees values below
// those given, every create gets each pool's lowest free value, and a
// full pool refuses it, as a model of the values held says (the search
// starts at the pool's free_from, migration 043, which creates raise and
// terminations lower).
func TestAllocationTakesTheLowestFreeValue(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	pools := func(vlanFrom int64) []lsm.Pool {
		return []lsm.Pool{
			{Name: "asn", Kind: lsm.PoolRange, From: 64512, To: 64523},
			{Name: "p2p", Kind: lsm.PoolCIDR, Prefix: "10.9.0.0/26", Size: 30},
			{Name: "vlan", Kind: lsm.PoolVLAN, From: vlanFrom, To: 20},
		}
	}
	if _, err := st.PutModel(ctx, e.ID, linkModel("a", pools(9))); err != nil {
		t.Fatal(err)
	}
	// What the model says: the values live instances hold.
	held := map[string]map[string]bool{"asn": {}, "p2p": {}, "vlan": {}}
	lowest := func(vlanFrom int64) map[string]string {
		want := map[string]string{}
		for i := int64(64512); i <= 64523; i++ {
			if v := fmt.Sprint(i); !held["asn"][v] {
				want["asn"] = v
				break
			}
		}
		for i := 0; i < 64; i += 4 {
			if v := fmt.Sprintf("10.9.0.%d/30", i); !held["p2p"][v] {
				want["p2p"] = v
				break
			}
		}
		for i := vlanFrom; i <= 20; i++ {
			if v := fmt.Sprint(i); !held["vlan"][v] {
				want["vlan"] = v
				break
			}
		}
		return want
	}
	values := func(inst store.ServiceInstance) map[string]string {
		return map[string]string{"asn": fmt.Sprint(inst.Candidate["asn"]), "p2p": fmt.Sprint(inst.Candidate["subnet"]),
			"vlan": fmt.Sprint(inst.Candidate["vlan"])}
	}
	rng := rand.New(rand.NewPCG(31, 43))
	var live []store.ServiceInstance
	vlanFrom := int64(9)
	for step := range 160 {
		if step == 80 {
			// The VLAN pool grows at its front: values below every one
			// given are free now, and the next creates take them.
			vlanFrom = 3
			if _, err := st.PutModel(ctx, e.ID, linkModel("b", pools(vlanFrom))); err != nil {
				t.Fatal(err)
			}
		}
		if len(live) > 0 && rng.IntN(5) < 2 {
			i := rng.IntN(len(live))
			if err := terminate(ctx, st, e.ID, live[i]); err != nil {
				t.Fatalf("step %d: terminate: %v", step, err)
			}
			for pool, v := range values(live[i]) {
				delete(held[pool], v)
			}
			live = slices.Delete(live, i, i+1)
			continue
		}
		want := lowest(vlanFrom)
		applied, err := createLink(ctx, st, e.ID, newLinkID(), fmt.Sprintf("s%d", step))
		if len(want) < 3 {
			if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "is exhausted") {
				t.Fatalf("step %d: a create with a pool full (%v free) = %v, want it refused", step, want, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: create: %v", step, err)
		}
		if got := values(applied.Instance); !maps.Equal(got, want) {
			t.Fatalf("step %d: the create got %v, want the lowest free values %v", step, got, want)
		}
		for pool, v := range want {
			held[pool][v] = true
		}
		live = append(live, applied.Instance)
	}
}

// TestAllocationChurnReplicas: creates and terminations of instances
// holding values of three pools, at once from two replicas, never wait
// for each other in a circle (a create locks its pools, then the live
// count; a termination the same, in that order) and never give a value
// twice: every one succeeds, or is refused only for an exhausted pool.
func TestAllocationChurnReplicas(t *testing.T) {
	t.Parallel()
	a, b, e := twoReplicas(t)
	ctx := context.Background()
	if _, err := a.PutModel(ctx, e.ID, linkModel("a", linkPools(4094, "10.1.0.0/24"))); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 6, 12
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if w%2 == 1 {
				st = b
			}
			for r := range rounds {
				applied, err := createLink(ctx, st, e.ID, newLinkID(), fmt.Sprintf("w%dr%d", w, r))
				if errors.Is(err, store.ErrConflict) && strings.Contains(err.Error(), "is exhausted") {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: create: %w", w, r, err)
					return
				}
				if err := terminate(ctx, st, e.ID, applied.Instance); err != nil {
					errs <- fmt.Errorf("worker %d round %d: terminate: %w", w, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for pool, u := range poolUsage(t, a, e.ID) {
		if u[1] != 0 {
			t.Errorf("pool %s: %d values still held after every instance was terminated", pool, u[1])
		}
	}
}

// twoReplicas is two stores on one database, as two servers are, and an
// environment.
func twoReplicas(t *testing.T) (a, b *store.Store, e store.Environment) {
	t.Helper()
	a, url := openStore(t)
	b, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return a, b, newEnv(t, a)
}
