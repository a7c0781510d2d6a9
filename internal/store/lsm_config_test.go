package store_test

import (
	"context"
	"errors"
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
