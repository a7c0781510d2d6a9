package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestEntityConfig: an entity's config defaults to auto transfers on, is
// stored per entity, survives the entity's registration again (a model
// export), goes with an entity the model drops, and an unknown entity's is
// ErrNotFound.
func TestEntityConfig(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	other := vmEntity()
	other.Name = "db"
	if err := st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{vmEntity(), other}); err != nil {
		t.Fatal(err)
	}
	config := func(name string) store.EntityConfig {
		t.Helper()
		ent, err := st.GetEntity(ctx, e.ID, name)
		if err != nil {
			t.Fatal(err)
		}
		return ent.Config
	}
	if c := config("vm"); !c.AutoTransfers {
		t.Errorf("default = %+v", c)
	}
	ent, err := st.SetEntityConfig(ctx, e.ID, "vm", store.EntityConfig{AutoTransfers: false})
	if err != nil || ent.Config.AutoTransfers || ent.Name != "vm" {
		t.Fatalf("set = %+v, %v", ent, err)
	}
	if c := config("db"); !c.AutoTransfers {
		t.Errorf("another entity's config changed: %+v", c)
	}
	changed := vmEntity()
	changed.Description = "changed by a new model"
	if err := st.RegisterEntities(ctx, e.ID, "h2", []lsm.Entity{changed, other}); err != nil {
		t.Fatal(err)
	}
	if c := config("vm"); c.AutoTransfers {
		t.Errorf("after a new registration = %+v", c)
	}
	if err := st.RegisterEntities(ctx, e.ID, "h3", []lsm.Entity{other}); err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterEntities(ctx, e.ID, "h4", []lsm.Entity{vmEntity(), other}); err != nil {
		t.Fatal(err)
	}
	if c := config("vm"); !c.AutoTransfers {
		t.Errorf("an entity dropped and defined again kept its config: %+v", c)
	}
	if _, err := st.SetEntityConfig(ctx, e.ID, "nope", store.EntityConfig{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown entity: %v", err)
	}
	named := store.EntityConfig{AutoTransfers: true, AutoTransferConfigs: map[string]bool{"auto_creating": false, "auto_up": true}}
	if ent, err := st.SetEntityConfig(ctx, e.ID, "vm", named); err != nil || !reflect.DeepEqual(ent.Config, named) {
		t.Errorf("per config name: %+v, %v", ent.Config, err)
	}
}

// TestInstanceConfig: an instance's config defaults to its entity's
// (auto transfers on, no name set), is stored per instance, is
// replaced as a whole by a set, and an unknown instance's is
// ErrNotFound; InstanceConfigs lists those set; the config goes with
// the instance's row.
func TestInstanceConfig(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	web, db := liveWebDeletedDB(t, st, e)
	if c, err := st.InstanceConfig(ctx, e.ID, web); err != nil || !reflect.DeepEqual(c, store.DefaultInstanceConfig()) {
		t.Errorf("default = %+v, %v", c, err)
	}
	set := store.InstanceConfig{AutoTransfers: true, AutoTransferConfigs: map[string]bool{"auto_creating": true}}
	if err := st.SetInstanceConfig(ctx, e.ID, web, set); err != nil {
		t.Fatal(err)
	}
	if c, err := st.InstanceConfig(ctx, e.ID, web); err != nil || !reflect.DeepEqual(c, set) {
		t.Errorf("set = %+v, %v", c, err)
	}
	off := store.InstanceConfig{AutoTransfers: false}
	if err := st.SetInstanceConfig(ctx, e.ID, web, off); err != nil {
		t.Fatal(err)
	}
	if c, err := st.InstanceConfig(ctx, e.ID, web); err != nil || !reflect.DeepEqual(c, off) {
		t.Errorf("set again = %+v, %v", c, err)
	}
	if c, err := st.InstanceConfig(ctx, e.ID, db); err != nil || !c.AutoTransfers {
		t.Errorf("another instance's = %+v, %v", c, err)
	}
	all, err := st.InstanceConfigs(ctx, e.ID)
	if err != nil || len(all) != 1 || !reflect.DeepEqual(all[web], off) {
		t.Errorf("configs = %+v, %v", all, err)
	}
	const nope = "00000000-0000-4000-8000-000000000000"
	if _, err := st.InstanceConfig(ctx, e.ID, nope); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown instance: %v", err)
	}
	if err := st.SetInstanceConfig(ctx, e.ID, nope, off); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("set of an unknown instance: %v", err)
	}
	if got := (store.EntityConfig{AutoTransfers: true, AutoTransferConfigs: map[string]bool{"a": false}}).Auto(set); got.Off || got.InstanceOff ||
		!got.Instance["auto_creating"] || got.Entity["a"] {
		t.Errorf("Auto = %+v", got)
	}
}

// TestTransferNotice: a notification's payload parses back, and what
// intend did not write is refused.
func TestTransferNotice(t *testing.T) {
	t.Parallel()
	const env, inst = "6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", "7F1C1B8E-4E43-4F7A-9A55-0A1B2C3D4E5F"
	n, ok := store.ParseTransferNotice(env + "/" + inst + "/12")
	if !ok || n.EnvironmentID != env || n.InstanceID != "7f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f" || n.Version != 12 {
		t.Errorf("parsed %+v, %v", n, ok)
	}
	for _, bad := range []string{"", env, env + "/" + inst, env + "/" + inst + "/0", env + "/" + inst + "/x",
		env + "/web/1", env + "/" + inst + "/1/2"} {
		if _, ok := store.ParseTransferNotice(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
