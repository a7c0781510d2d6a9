package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/migrations"
)

// TestInstanceQuotaUnderConcurrentCreates: creates racing from two
// replicas (two stores, two pools) pass service_instance_quota together
// no more than one at a time: exactly the quota's creates are taken, the
// rest are 409s naming the setting. A terminated instance frees its
// place; a deleted instance's row going (an entity dropped from the model)
// changes nothing; a create's dry-run check agrees with the create.
func TestInstanceQuotaUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	a, b, e := twoReplicas(t)
	ctx := context.Background()
	const quota = 5
	if _, err := a.UpdateEnvironment(ctx, e.ID, store.EnvironmentPatch{Settings: map[string]json.RawMessage{
		"service_instance_quota": json.RawMessage(fmt.Sprint(quota))}}); err != nil {
		t.Fatal(err)
	}
	vm := lsm.Entity{Name: "vm", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true}}}
	if _, err := a.PutModel(ctx, e.ID, store.NewModel{Hash: "m", Archive: []byte("m"), Files: 1, Origin: "cli",
		Entities: []lsm.Entity{vm}}); err != nil {
		t.Fatal(err)
	}
	create := func(st *store.Store, id, name string) (store.AppliedChange, error) {
		return st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "start",
			Sets: lsm.Sets{Candidate: map[string]any{"name": name}}})
	}
	refused := func(err error) bool {
		var ce *store.ConflictError
		return errors.As(err, &ce) && strings.Contains(ce.What, fmt.Sprintf("holds %d live service instances, its service_instance_quota", quota))
	}

	const creates = 40
	var wg sync.WaitGroup
	results := make([]error, creates)
	made := make([]store.ServiceInstance, creates)
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if i%2 == 1 {
				st = b
			}
			applied, err := create(st, newLinkID(), fmt.Sprintf("vm%d", i))
			results[i], made[i] = err, applied.Instance
		}()
	}
	wg.Wait()
	var live []store.ServiceInstance
	for i, err := range results {
		switch {
		case err == nil:
			live = append(live, made[i])
		case refused(err):
		default:
			t.Errorf("create %d: %v", i, err)
		}
	}
	if len(live) != quota {
		t.Fatalf("%d of %d concurrent creates were taken, want the quota's %d", len(live), creates, quota)
	}
	if err := a.CheckInstanceQuota(ctx, e.ID); !refused(err) {
		t.Errorf("the dry-run check at the quota: %v", err)
	}
	if _, err := create(b, newLinkID(), "late"); !refused(err) {
		t.Errorf("a create at the quota: %v", err)
	}

	// A terminated instance frees its place, once.
	inst := live[0]
	if _, err := a.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: inst.ID, Version: inst.Version + 1,
		State: "terminated", Deleted: true, Sets: inst.Sets}); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInstanceQuota(ctx, e.ID); err != nil {
		t.Errorf("the dry-run check after a termination: %v", err)
	}
	// The model drops the entity: refused while instances live, so the
	// deleted instance's row stays counted out; it is removed with the
	// entity once every instance is terminated, and the count stays 0.
	for _, inst := range live[1:] {
		if _, err := a.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: inst.ID, Version: inst.Version + 1,
			State: "terminated", Deleted: true, Sets: inst.Sets}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.PutModel(ctx, e.ID, store.NewModel{Hash: "n", Archive: []byte("n"), Files: 1, Origin: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutModel(ctx, e.ID, store.NewModel{Hash: "m2", Archive: []byte("m2"), Files: 1, Origin: "cli",
		Entities: []lsm.Entity{vm}}); err != nil {
		t.Fatal(err)
	}
	for i := range quota {
		if _, err := create(a, newLinkID(), fmt.Sprintf("again%d", i)); err != nil {
			t.Fatalf("create %d after every instance went: %v", i, err)
		}
	}
	if _, err := create(a, newLinkID(), "over"); !refused(err) {
		t.Errorf("a create past the quota again: %v", err)
	}
}

// TestInstanceCountsMigration: migration 042 counts the live instances
// already there (a database upgraded with an inventory), and going down
// and up again counts them anew.
func TestInstanceCountsMigration(t *testing.T) {
	t.Parallel()
	st, url := openStore(t)
	e := newEnv(t, st)
	ctx := context.Background()
	vm := lsm.Entity{Name: "vm", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true}}}
	if _, err := st.PutModel(ctx, e.ID, store.NewModel{Hash: "m", Archive: []byte("m"), Files: 1, Origin: "cli",
		Entities: []lsm.Entity{vm}}); err != nil {
		t.Fatal(err)
	}
	var last store.ServiceInstance
	for i := range 3 {
		applied, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: newLinkID(), Version: 1,
			State: "start", Sets: lsm.Sets{Candidate: map[string]any{"name": fmt.Sprint(i)}}})
		if err != nil {
			t.Fatal(err)
		}
		last = applied.Instance
	}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: last.ID, Version: 2,
		State: "terminated", Deleted: true, Sets: last.Sets}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	live := `select live from service_instance_counts where environment_id = '` + e.ID + `'`
	if n := count(t, conn, live); n != 2 {
		t.Fatalf("the trigger counted %d live instances, want 2", n)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := migrations.Apply(ctx, url, 41); err != nil {
		t.Fatal(err)
	}
	if _, _, err := migrations.Apply(ctx, url, latest); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, live); n != 2 {
		t.Errorf("the migration counted %d live instances, want 2", n)
	}
}
