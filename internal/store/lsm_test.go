package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// vmEntity is a service entity with an identity, an updatable attribute
// and the simple lifecycle.
func vmEntity(attrs ...lsm.AttributeSpec) lsm.Entity {
	if attrs == nil {
		attrs = []lsm.AttributeSpec{
			{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true},
			{Name: "memory", Modifier: lsm.ReadWriteAlways, Schema: json.RawMessage(`{"type": "integer"}`)},
		}
	}
	return lsm.Entity{Name: "vm", Identity: "name", Attributes: attrs, Lifecycle: lsm.Simple()}
}

// openVM opens a store with a fresh environment whose catalog holds
// vmEntity.
func openVM(t *testing.T) (*store.Store, store.Environment, *pgx.Conn) {
	t.Helper()
	st, _, conn := open(t)
	e := newEnv(t, st)
	if err := st.RegisterEntities(context.Background(), e.ID, "h1", []lsm.Entity{vmEntity()}); err != nil {
		t.Fatal(err)
	}
	return st, e, conn
}

// liveWebDeletedDB applies two instances of vm to e: web, created (in
// start at version 1), and db, created and deleted (terminated at version
// 2). It returns their ids.
func liveWebDeletedDB(t *testing.T, st *store.Store, e store.Environment) (web, db string) {
	t.Helper()
	ctx := context.Background()
	web, db = "6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", "7f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	for i, id := range []string{web, db} {
		if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1,
			Identity: []string{"web", "db"}[i], State: "start", Sets: lsm.Sets{Candidate: map[string]any{"name": "x"}},
			Event: json.RawMessage(`{"trigger": "create"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: db, Version: 2, Identity: "db",
		State: "terminated", Deleted: true, Event: json.RawMessage(`{"trigger": "delete"}`)}); err != nil {
		t.Fatal(err)
	}
	return web, db
}

func TestServiceInventory(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	const id = "6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	live := func() bool {
		t.Helper()
		has, err := st.HasLiveServiceInstances(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return has
	}
	if live() {
		t.Error("a fresh environment has live instances")
	}
	req := &lsm.IdempotentRequest{Scope: "POST /lsm/v1/service_inventory/vm", Key: "k1", Hash: []byte{1}, Status: 201}
	create := store.InstanceChange{Entity: "vm", ID: id, Version: 1, Identity: "web", State: "start",
		Sets:  lsm.Sets{Candidate: map[string]any{"name": "web", "memory": 2.0}},
		Event: json.RawMessage(`{"trigger": "create", "target": "start"}`), Request: req}
	applied, err := st.ApplyInstanceChange(ctx, e.ID, create)
	if err != nil {
		t.Fatal(err)
	}
	inst := applied.Instance
	if !applied.Written || applied.Source != "" || !applied.SourceSince.IsZero() {
		t.Errorf("the create: written %v, source %q since %v; want written, from no state", applied.Written,
			applied.Source, applied.SourceSince)
	}
	if inst.Version != 1 || inst.State != "start" || inst.Candidate["name"] != "web" || inst.Identity != "web" {
		t.Errorf("created %+v", inst)
	}
	if !live() {
		t.Error("the created instance is not live")
	}
	// A retried write of the same version changes nothing.
	if again, err := st.ApplyInstanceChange(ctx, e.ID, create); err != nil || again.Instance.Version != 1 || again.Written {
		t.Errorf("repeat: %+v, %v; want version 1, not written again", again, err)
	}
	stored, ok, err := st.LookupRequest(ctx, e.ID, req.Scope, "k1")
	if err != nil || !ok || stored.Status != 201 {
		t.Fatalf("stored request: %+v %v %v", stored, ok, err)
	}
	var resp store.ServiceInstance
	if err := json.Unmarshal(stored.Response, &resp); err != nil || resp.ID != id || resp.Version != 1 {
		t.Errorf("stored response %s: %v", stored.Response, err)
	}

	next := store.InstanceChange{Entity: "vm", ID: id, Version: 2, Identity: "web", State: "acknowledged",
		Sets:  lsm.Apply(lsm.Promote, create.Sets),
		Event: json.RawMessage(`{"trigger": "auto", "source": "start", "target": "acknowledged"}`)}
	if applied, err = st.ApplyInstanceChange(ctx, e.ID, next); err != nil || applied.Instance.Version != 2 ||
		applied.Instance.Active["memory"] != 2.0 {
		t.Fatalf("version 2: %+v, %v", applied, err)
	}
	if !applied.Written || applied.Source != "start" || !applied.SourceSince.Equal(inst.UpdatedAt) {
		t.Errorf("version 2 left %q entered at %v (written %v); want start, entered at the create, %v",
			applied.Source, applied.SourceSince, applied.Written, inst.UpdatedAt)
	}
	// A retry of version 1 with version 2 written answers version 1 as
	// it was written (its state and sets), not the instance as it is now.
	if again, err := st.ApplyInstanceChange(ctx, e.ID, create); err != nil || again.Written ||
		again.Instance.Version != 1 || again.Instance.State != "start" || again.Instance.Active != nil ||
		again.Instance.Candidate["name"] != "web" || !again.Instance.UpdatedAt.Equal(inst.UpdatedAt) {
		t.Errorf("retry of version 1 after version 2: %+v, %v; want version 1 in start with no active set", again, err)
	}
	// A writer that missed version 2 is refused.
	stale := next
	stale.Version = 4
	if _, err := st.ApplyInstanceChange(ctx, e.ID, stale); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale write: %v", err)
	}
	// Another live instance cannot take the identity.
	dup := create
	dup.ID, dup.Request = "7f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", nil
	if _, err := st.ApplyInstanceChange(ctx, e.ID, dup); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate identity: %v", err)
	}

	if got, err := st.GetInstance(ctx, e.ID, "vm", "web"); err != nil || got.ID != id {
		t.Errorf("by identity: %+v, %v", got, err)
	}
	if got, err := st.GetInstance(ctx, e.ID, "vm", id); err != nil || got.State != "acknowledged" {
		t.Errorf("by id: %+v, %v", got, err)
	}
	if _, err := st.GetInstance(ctx, e.ID, "vm", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown identity: %v", err)
	}
	list, err := st.ListInstances(ctx, e.ID, "vm", "acknowledged", false, "", 10)
	if err != nil || len(list) != 1 {
		t.Errorf("list: %v, %v", list, err)
	}
	log, err := st.InstanceLog(ctx, e.ID, id)
	if err != nil || len(log) != 2 || log[0].Version != 2 || log[1].State != "start" {
		t.Errorf("log: %+v, %v", log, err)
	}
	ent, err := st.GetEntity(ctx, e.ID, "vm")
	if err != nil || ent.Instances["acknowledged"] != 1 || ent.Lifecycle.Start != lsm.Simple().Start {
		t.Errorf("entity: %+v, %v", ent, err)
	}

	// Catalog updates that would break the live instance are refused,
	// naming it; compatible ones pass.
	for _, tc := range []struct {
		why    string
		cat    []lsm.Entity
		change string
	}{
		{"entity removed", nil, "removed_entity"},
		{"attribute removed", []lsm.Entity{vmEntity(lsm.AttributeSpec{Name: "name", Modifier: lsm.ReadWrite,
			Schema: json.RawMessage(`{"type": "string"}`)})}, "removed_attribute"},
		{"attribute retyped", []lsm.Entity{vmEntity(
			lsm.AttributeSpec{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`)},
			lsm.AttributeSpec{Name: "memory", Modifier: lsm.ReadWriteAlways, Schema: json.RawMessage(`{"type": "string"}`)})},
			"retyped_attribute"},
	} {
		err := st.RegisterEntities(ctx, e.ID, "h2", tc.cat)
		var be *store.BreakingChangesError
		if !errors.As(err, &be) || be.Changes[0].Change != tc.change || be.Changes[0].Instances[0] != id {
			t.Errorf("%s: %v", tc.why, err)
		}
	}
	widened := vmEntity(
		lsm.AttributeSpec{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`)},
		lsm.AttributeSpec{Name: "memory", Modifier: lsm.ReadWriteAlways, Schema: json.RawMessage(`{"type": "number"}`)},
		lsm.AttributeSpec{Name: "disk", Modifier: lsm.ReadWriteAlways, Schema: json.RawMessage(`{"type": "integer"}`)})
	if err := st.RegisterEntities(ctx, e.ID, "h3", []lsm.Entity{widened}); err != nil {
		t.Errorf("a compatible update: %v", err)
	}
	if ent, _ := st.GetEntity(ctx, e.ID, "vm"); len(ent.Attributes) != 3 || ent.ModelHash != "h3" {
		t.Errorf("after the update: %+v", ent)
	}
}

// TestAppliedChangeSource: a transfer reports the state it left and when
// the instance entered it, from the log; a transfer from a state to
// itself does not restart the clock, and a failed write reports nothing
// written.
func TestAppliedChangeSource(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	const id = "8b1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	sets := lsm.Sets{Candidate: map[string]any{"name": "src"}}
	var at []time.Time // by version - 1
	for v, step := range []struct{ state, trigger, wantSource string }{
		{"start", "create", ""},
		{"acknowledged", "auto", "start"},
		{"acknowledged", "on_update", "acknowledged"}, // to itself: entered at version 2
		{"creating", "auto", "acknowledged"},          // still entered at version 2
		{"up", "resource", "creating"},
	} {
		version := int64(v + 1)
		a, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: version,
			Identity: "src", State: step.state, Sets: sets,
			Event: json.RawMessage(fmt.Sprintf(`{"trigger": %q, "target": %q}`, step.trigger, step.state))})
		if err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		at = append(at, a.Instance.UpdatedAt)
		var wantSince time.Time
		switch version {
		case 2:
			wantSince = at[0]
		case 3, 4:
			wantSince = at[1]
		case 5:
			wantSince = at[3]
		}
		if !a.Written || a.Source != step.wantSource || !a.SourceSince.Equal(wantSince) {
			t.Errorf("version %d: written %v, left %q entered at %v; want written, left %q entered at %v",
				version, a.Written, a.Source, a.SourceSince, step.wantSource, wantSince)
		}
	}
	// A stale write fails and reports nothing written.
	a, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 9,
		Identity: "src", State: "up", Sets: sets, Event: json.RawMessage(`{"trigger": "auto"}`)})
	if !errors.Is(err, store.ErrConflict) || a.Written {
		t.Errorf("stale write: written %v, %v; want not written, a conflict", a.Written, err)
	}
}

// TestIdempotencyKeys: a key names one request per endpoint; the first
// response stays for a day, then a new request under the key stores its
// own; pruning removes what expired.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	st, e, conn := openVM(t)
	ctx := context.Background()
	const id = "7a1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	scope := "POST /lsm/v1/service_inventory/vm"
	create := store.InstanceChange{Entity: "vm", ID: id, Version: 1, Identity: "db", State: "start",
		Sets:    lsm.Sets{Candidate: map[string]any{"name": "db"}},
		Event:   json.RawMessage(`{"trigger": "create", "target": "start"}`),
		Request: &lsm.IdempotentRequest{Scope: scope, Key: "k", Hash: []byte{1}, Status: 201}}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, create); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.LookupRequest(ctx, e.ID, "PATCH /lsm/v1/service_inventory/vm/"+id, "k"); ok || err != nil {
		t.Errorf("the key on another endpoint: found %v, %v; want another request", ok, err)
	}
	if r, ok, err := st.LookupRequest(ctx, e.ID, scope, "k"); !ok || err != nil || r.Status != 201 {
		t.Fatalf("the key on its endpoint: %+v %v %v", r, ok, err)
	}

	// A day later the key is free, and the next request's response is the
	// one kept.
	if _, err := conn.Exec(ctx, `update lsm_requests set created_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.LookupRequest(ctx, e.ID, scope, "k"); ok {
		t.Error("an expired response is still answered")
	}
	next := store.InstanceChange{Entity: "vm", ID: id, Version: 2, Identity: "db", State: "acknowledged",
		Sets:    lsm.Apply(lsm.Promote, create.Sets),
		Event:   json.RawMessage(`{"trigger": "auto", "source": "start", "target": "acknowledged"}`),
		Request: &lsm.IdempotentRequest{Scope: scope, Key: "k", Hash: []byte{2}, Status: 200}}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, next); err != nil {
		t.Fatal(err)
	}
	r, ok, err := st.LookupRequest(ctx, e.ID, scope, "k")
	if !ok || err != nil || r.Status != 200 || r.Hash[0] != 2 {
		t.Errorf("after reuse past expiry: %+v %v %v, want the new request's response", r, ok, err)
	}

	if _, err := conn.Exec(ctx, `update lsm_requests set created_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PruneRequests(ctx); err != nil || n < 1 {
		t.Errorf("prune = %d, %v; want the expired response removed", n, err)
	}
	// The instance's log, a version a page, newest first.
	page, err := st.InstanceLogPage(ctx, e.ID, id, 0, 1)
	if err != nil || len(page) != 1 || page[0].Version != 2 {
		t.Fatalf("first log page = %+v, %v", page, err)
	}
	if page, err = st.InstanceLogPage(ctx, e.ID, id, 2, 1); err != nil || len(page) != 1 || page[0].Version != 1 {
		t.Errorf("log page before 2 = %+v, %v", page, err)
	}
}

// TestLiveServiceInstancesCache checks that the live instances read
// follows every write although it decodes only the rows that changed
// since the last read: updates, deletes and creates show at once, each
// environment keeps its own, and a row rewritten with other content at
// the same version (an environment deleted and made again with the same
// ids cannot do that, but a wrong cache key would) is read again.
func TestLiveServiceInstancesCache(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	ctx := context.Background()
	e1 := newEnv(t, st)
	e2, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.Environment{e1, e2} {
		if err := st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{vmEntity()}); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"6f1c1b8e-4e43-4f7a-9a55-000000000001", "6f1c1b8e-4e43-4f7a-9a55-000000000002"}
	versions := map[string]int64{}
	write := func(e store.Environment, id, state string, memory float64, deleted bool) {
		t.Helper()
		key := e.ID + id
		versions[key]++
		_, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: versions[key],
			Identity: id[len(id)-4:], State: state, Deleted: deleted,
			Sets:  lsm.Sets{Active: map[string]any{"name": id[len(id)-4:], "memory": memory}},
			Event: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	read := func(e store.Environment) map[string]string {
		t.Helper()
		live, err := st.LiveServiceInstances(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, inst := range live {
			out[inst.ID[len(inst.ID)-1:]] = fmt.Sprintf("%s v%d %v", inst.State, inst.Version, inst.Active["memory"])
		}
		return out
	}
	check := func(e store.Environment, want map[string]string) {
		t.Helper()
		for range 2 { // from the database, then from the cache
			if got := read(e); !maps.Equal(got, want) {
				t.Fatalf("live instances %q; want %q", got, want)
			}
		}
	}
	write(e1, ids[0], "up", 1, false)
	write(e2, ids[0], "up", 10, false)
	check(e1, map[string]string{"1": "up v1 1"})
	check(e2, map[string]string{"1": "up v1 10"})
	write(e1, ids[0], "updating", 2, false)
	write(e1, ids[1], "up", 3, false)
	check(e1, map[string]string{"1": "updating v2 2", "2": "up v1 3"})
	check(e2, map[string]string{"1": "up v1 10"})
	write(e1, ids[0], "terminated", 2, true)
	check(e1, map[string]string{"2": "up v1 3"})
	// Behind the store's back, the same version with other content.
	if _, err := conn.Exec(ctx, `update service_instances set active_attributes = '{"name": "0002", "memory": 4}'
		where environment_id = $1::uuid and id = $2::uuid`, e1.ID, ids[1]); err != nil {
		t.Fatal(err)
	}
	check(e1, map[string]string{"2": "up v1 4"})
	write(e1, ids[1], "terminated", 3, true)
	check(e1, map[string]string{})
	check(e2, map[string]string{"1": "up v1 10"})
}
