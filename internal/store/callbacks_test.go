package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/callbacks"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/store/storetest"
)

// instanceID is the uuid of test instance n.
func instanceID(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", n) }

// transfer writes version v of instance n of entity in state, as the
// lifecycle engine would.
func transfer(t testing.TB, st *store.Store, envID, entity string, n int, v int64, source, state string) {
	t.Helper()
	ev := fmt.Sprintf(`{"trigger": "auto", "source": %q, "target": %q, "error": false, "operations": ["promote"]}`,
		source, state)
	if v == 1 {
		ev = fmt.Sprintf(`{"trigger": "create", "target": %q, "error": false, "operations": [], "actor": "token:alice"}`, state)
	}
	_, err := st.ApplyInstanceChange(context.Background(), envID, store.InstanceChange{
		Entity: entity, ID: instanceID(n), Version: v, Identity: fmt.Sprintf("%s%d", entity, n), State: state,
		Sets:  lsm.Sets{Candidate: map[string]any{"name": fmt.Sprintf("%s%d", entity, n)}},
		Event: json.RawMessage(ev)})
	if err != nil {
		t.Fatal(err)
	}
}

// key names a claimed row.
func key(d store.CallbackDelivery) string {
	return fmt.Sprintf("%s/%s/%d", d.CallbackID[:8], d.InstanceID[:8], d.Version)
}

func claim(t *testing.T, st *store.Store, lease time.Duration) map[string]store.CallbackDelivery {
	t.Helper()
	ds, err := st.ClaimCallbackEvents(context.Background(), 100, lease)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.CallbackDelivery{}
	for _, d := range ds {
		out[key(d)] = d
	}
	return out
}

func keys(m map[string]store.CallbackDelivery) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestCallbackOutbox: a transfer writes one outbox row per matching
// callback (all entities, or its own), with the event as its payload;
// claims go in version order per (callback, instance), one at a time;
// a failed attempt is retried, a dead one lets the next version go; an
// expired claim is taken over; a stale claim records nothing; deleting a
// callback drops its rows and writes no more; a commit that wrote rows
// notifies the listeners.
func TestCallbackOutbox(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	db := vmEntity()
	db.Name = "db"
	if err := st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{vmEntity(), db}); err != nil {
		t.Fatal(err)
	}
	// A transfer before any callback writes no row.
	transfer(t, st, e.ID, "vm", 9, 1, "", "start")
	if got := claim(t, st, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v without callbacks", keys(got))
	}

	all, err := st.CreateCallback(ctx, e.ID, store.NewCallback{URL: "http://a.example/", Secret: "s1", CreatedBy: "token:t"})
	if err != nil {
		t.Fatal(err)
	}
	vmOnly, err := st.CreateCallback(ctx, e.ID, store.NewCallback{ServiceEntity: "vm", URL: "http://b.example/",
		Secret: "s2", CreatedBy: "token:t"})
	if err != nil {
		t.Fatal(err)
	}
	// Listen before the transfers: their commits notify.
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	notified := make(chan struct{}, 1)
	listening := make(chan error, 1)
	go func() {
		listening <- st.ListenCallbacks(lctx, func() {
			select {
			case notified <- struct{}{}:
			default:
			}
		})
	}()
	// The first notification says it listens.
	select {
	case <-notified:
	case err := <-listening:
		t.Fatalf("listen: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening after 10 s")
	}
	transfer(t, st, e.ID, "vm", 1, 1, "", "start")
	transfer(t, st, e.ID, "vm", 1, 2, "start", "acknowledged")
	transfer(t, st, e.ID, "vm", 1, 3, "acknowledged", "creating")
	transfer(t, st, e.ID, "db", 2, 1, "", "start")
	transfer(t, st, e.ID, "db", 2, 2, "start", "acknowledged")
	select {
	case <-notified:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after transfers with callbacks")
	}

	a, b := all.ID[:8], vmOnly.ID[:8]
	i1, i2 := instanceID(1)[:8], instanceID(2)[:8]
	got := claim(t, st, time.Minute)
	want := []string{a + "/" + i1 + "/1", a + "/" + i2 + "/1", b + "/" + i1 + "/1"}
	if len(got) != len(want) {
		t.Fatalf("first claim %v, want %v", keys(got), want)
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Fatalf("first claim %v, want %v", keys(got), want)
		}
	}
	d := got[a+"/"+i1+"/1"]
	var ev callbacks.Event
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.EventID != d.EventID || ev.Environment != e.ID || ev.EnvironmentName != "e" || ev.ServiceEntity != "vm" ||
		ev.InstanceID != instanceID(1) || ev.Identity != "vm1" || ev.Version != 1 || ev.SourceState != "" ||
		ev.TargetState != "start" || ev.Trigger != "create" || ev.Error || ev.Actor != "token:alice" ||
		ev.Time.IsZero() || ev.Operations == nil || d.URL != "http://a.example/" || d.Secret != "s1" || d.Attempts != 1 {
		t.Errorf("payload %s of %+v", d.Payload, d)
	}
	// The same transfer has one event id for every callback.
	if other := got[b+"/"+i1+"/1"]; other.EventID != d.EventID {
		t.Errorf("event ids %s and %s for one transfer", d.EventID, other.EventID)
	}
	// Claimed rows are not claimed again, and nothing behind them.
	if again := claim(t, st, time.Minute); len(again) != 0 {
		t.Fatalf("second claim %v", keys(again))
	}

	// A failed attempt due now is retried before version 2 goes.
	if err := st.CallbackFailed(ctx, d, 500, "HTTP 500", time.Now().Add(-time.Second), false); err != nil {
		t.Fatal(err)
	}
	got = claim(t, st, time.Minute)
	retried, ok := got[a+"/"+i1+"/1"]
	if len(got) != 1 || !ok || retried.Attempts != 2 {
		t.Fatalf("after a failure: %v", keys(got))
	}
	// A stale claim (the first) records nothing.
	if err := st.CallbackFailed(ctx, d, 0, "stale", time.Now().Add(-time.Second), true); err != nil {
		t.Fatal(err)
	}
	if again := claim(t, st, time.Minute); len(again) != 0 {
		t.Fatalf("a stale claim's failure released %v", keys(again))
	}
	if err := st.CallbackDelivered(ctx, retried, 200); err != nil {
		t.Fatal(err)
	}
	got = claim(t, st, time.Minute)
	v2, ok := got[a+"/"+i1+"/2"]
	if len(got) != 1 || !ok {
		t.Fatalf("after delivery: %v", keys(got))
	}
	// Given up on: version 3 may go.
	if err := st.CallbackFailed(ctx, v2, 0, "connection refused", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	got = claim(t, st, 0)
	v3, ok := got[a+"/"+i1+"/3"]
	if len(got) != 1 || !ok {
		t.Fatalf("after dead: %v", keys(got))
	}
	// A claim whose lease ran out (its dispatcher died) is taken over.
	got = claim(t, st, time.Minute)
	if over, ok := got[a+"/"+i1+"/3"]; len(got) != 1 || !ok || over.Attempts != v3.Attempts+1 || over.LeaseToken == v3.LeaseToken {
		t.Fatalf("expired claim: %v", keys(got))
	}

	cb, err := st.GetCallback(ctx, e.ID, all.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := cb.Stats
	if s.Delivered != 1 || s.Dead != 1 || s.Pending != 3 || s.LastError != "connection refused" ||
		s.LastDeliveredAt == nil || s.OldestPending == nil {
		t.Errorf("stats %+v", s)
	}
	dead, err := st.CallbackEvents(ctx, all.ID, "dead", 10)
	if err != nil || len(dead) != 1 || dead[0].Version != 2 || dead[0].LastError != "connection refused" {
		t.Errorf("dead events %+v, %v", dead, err)
	}
	list, err := st.ListCallbacks(ctx, e.ID)
	if err != nil || len(list) != 2 || list[0].ID != all.ID || list[1].ServiceEntity != "vm" || list[1].Stats.Pending != 3 {
		t.Errorf("list %+v, %v", list, err)
	}

	// Deleting a callback drops its rows, and transfers write none.
	if _, err := st.DeleteCallback(ctx, e.ID, vmOnly.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteCallback(ctx, e.ID, vmOnly.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	transfer(t, st, e.ID, "vm", 1, 4, "creating", "up")
	if evs, err := st.CallbackEvents(ctx, vmOnly.ID, "pending", 10); err != nil || len(evs) != 0 {
		t.Errorf("deleted callback's rows: %+v, %v", evs, err)
	}
	if _, err := st.GetCallback(ctx, "00000000-0000-4000-8000-000000000000", all.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another environment's callback: %v", err)
	}
	if n, err := st.PruneCallbackEvents(ctx, 0, 0); err != nil || n != 2 {
		t.Errorf("pruned %d, %v", n, err)
	}
}

// TestCallbackClaimsDoNotOverlap: dispatchers claiming at once never
// get the same row, and every row is claimed.
func TestCallbackClaimsDoNotOverlap(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	if _, err := st.CreateCallback(ctx, e.ID, store.NewCallback{URL: "http://a.example/", Secret: "s", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		transfer(t, st, e.ID, "vm", i, 1, "", "start")
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				ds, err := st.ClaimCallbackEvents(ctx, 3, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					seen[key(d)]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("claimed %d rows, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s claimed %d times", k, c)
		}
	}
}

// BenchmarkApplyInstanceChange measures a transfer's write (a create),
// without callbacks, with one for another entity (an outbox probe that
// finds nothing) and with one that gets the event.
func BenchmarkApplyInstanceChange(b *testing.B) {
	for _, tc := range []struct {
		name     string
		callback string // its entity; "-": none
	}{{"no_callbacks", "-"}, {"other_entity_callback", "db"}, {"one_callback", "vm"}} {
		b.Run(tc.name, func(b *testing.B) {
			st, e := benchEnv(b)
			if tc.callback != "-" {
				if _, err := st.CreateCallback(context.Background(), e.ID, store.NewCallback{ServiceEntity: tc.callback,
					URL: "http://a.example/", Secret: "s", CreatedBy: "t"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				transfer(b, st, e.ID, "vm", i, 1, "", "start")
			}
		})
	}
}

// benchEnv is an environment with the entities vm and db.
func benchEnv(b *testing.B) (*store.Store, store.Environment) {
	st, e := storetest.Env(b, nil)
	db := vmEntity()
	db.Name = "db"
	if err := st.RegisterEntities(context.Background(), e.ID, "h1", []lsm.Entity{vmEntity(), db}); err != nil {
		b.Fatal(err)
	}
	return st, e
}

// TestCallbackEventsPark: an event written while an earlier one of its
// instance is pending is parked (never scanned by a claim); a parked
// event with nothing pending before it, which releaseNext should have
// made due, is made due by the safety net.
func TestCallbackEventsPark(t *testing.T) {
	t.Parallel()
	st, e, conn := openVM(t)
	ctx := context.Background()
	cb, err := st.CreateCallback(ctx, e.ID, store.NewCallback{URL: "http://a.example/", Secret: "s", CreatedBy: "t"})
	if err != nil {
		t.Fatal(err)
	}
	transfer(t, st, e.ID, "vm", 1, 1, "", "start")
	transfer(t, st, e.ID, "vm", 1, 2, "start", "acknowledged")
	parked := func() []int64 {
		t.Helper()
		rows, err := conn.Query(ctx, `select version from lsm_callback_events
			where callback_id = $1::uuid and next_attempt_at = 'infinity' order by version`, cb.ID)
		if err != nil {
			t.Fatal(err)
		}
		var vs []int64
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		return vs
	}
	if p := parked(); len(p) != 1 || p[0] != 2 {
		t.Fatalf("parked %v, want [2]", p)
	}
	if n, err := st.UnparkCallbackEvents(ctx); err != nil || n != 0 {
		t.Errorf("unparked %d behind a pending event: %v", n, err)
	}
	// Lose version 1 behind the store's back: version 2 is orphaned.
	if _, err := conn.Exec(ctx, `update lsm_callback_events set status = 'delivered' where version = 1`); err != nil {
		t.Fatal(err)
	}
	if n, err := st.UnparkCallbackEvents(ctx); err != nil || n != 1 || len(parked()) != 0 {
		t.Errorf("unparked %d, %v; still parked %v", n, err, parked())
	}
	if got := claim(t, st, time.Minute); len(got) != 1 {
		t.Errorf("claimed %v", keys(got))
	}
}
