package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// relationEntities are a site and an alias whose attribute site
// references one site instance.
func relationEntities() []lsm.Entity {
	site := vmEntity()
	site.Name = "site"
	alias := lsm.Entity{Name: "alias", Identity: "name", Lifecycle: lsm.Simple(), Attributes: []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true},
		{Name: "site", Modifier: lsm.ReadWriteAlways, Schema: json.RawMessage(`{"type": "string"}`), Required: true,
			References: "site"},
	}}
	return []lsm.Entity{alias, site}
}

func uuidN(prefix, n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", prefix, n) }

func change(entity, id string, version int64, identity, state string, sets lsm.Sets, trigger string) store.InstanceChange {
	return store.InstanceChange{Entity: entity, ID: id, Version: version, Identity: identity, State: state, Sets: sets,
		Delete: trigger == "on_delete", Deleted: state == "terminated",
		Event: json.RawMessage(`{"trigger": "` + trigger + `", "target": "` + state + `"}`)}
}

// TestInstanceReferences: a reference to no live instance is refused; a
// referenced instance cannot be deleted or purged, naming its referrers;
// once the referrer is terminated it can.
func TestInstanceReferences(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	if err := st.RegisterEntities(ctx, e.ID, "h1", relationEntities()); err != nil {
		t.Fatal(err)
	}
	site, alias := uuidN(1, 1), uuidN(2, 1)
	siteSets := lsm.Sets{Active: map[string]any{"name": "blog"}}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, change("site", site, 1, "blog", "up", siteSets, "create")); err != nil {
		t.Fatal(err)
	}
	// Dangling: by identity and by id.
	for _, v := range []string{"nope", uuidN(9, 9)} {
		_, err := st.ApplyInstanceChange(ctx, e.ID, change("alias", alias, 1, "www", "start",
			lsm.Sets{Candidate: map[string]any{"name": "www", "site": v}}, "create"))
		ae, ok := store.IsAttributeError(err)
		if !ok || len(ae.Problems) != 1 || ae.Problems[0].Attribute != "site" || ae.Problems[0].Reason != lsm.ReasonNoSuchInstance {
			t.Fatalf("dangling %q: %v", v, err)
		}
	}
	// By identity: the row holds the id.
	aliasSets := lsm.Sets{Candidate: map[string]any{"name": "www", "site": "blog"}}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, change("alias", alias, 1, "www", "start", aliasSets, "create")); err != nil {
		t.Fatal(err)
	}
	rs, err := st.ReferencedBy(ctx, e.ID, site)
	if err != nil || len(rs) != 1 || rs[0].ID != alias || rs[0].Attribute != "site" || rs[0].Identity != "www" || rs[0].Entity != "alias" {
		t.Fatalf("referenced by: %+v, %v", rs, err)
	}
	// The delete, and a purge without the request, are refused.
	for _, c := range []store.InstanceChange{
		change("site", site, 2, "blog", "deleting", siteSets, "on_delete"),
		change("site", site, 2, "blog", "deleting", siteSets, "auto"),
		change("site", site, 2, "blog", "terminated", siteSets, "on_delete"),
	} {
		_, err := st.ApplyInstanceChange(ctx, e.ID, c)
		var re *store.ReferencedError
		if !errors.As(err, &re) || len(re.Referrers) != 1 || re.Referrers[0].ID != alias || !errors.Is(err, store.ErrConflict) {
			t.Fatalf("delete of a referenced site (%s): %v", c.State, err)
		}
	}
	// Other transfers of the site pass.
	if _, err := st.ApplyInstanceChange(ctx, e.ID, change("site", site, 2, "blog", "update_start", siteSets, "on_update")); err != nil {
		t.Fatal(err)
	}
	// The alias goes: deleting keeps the row, terminated drops it.
	if _, err := st.ApplyInstanceChange(ctx, e.ID, change("alias", alias, 2, "www", "deleting", aliasSets, "on_delete")); err != nil {
		t.Fatal(err)
	}
	if rs, _ := st.ReferencedBy(ctx, e.ID, site); len(rs) != 1 {
		t.Errorf("a deleting referrer still references: %+v", rs)
	}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, change("alias", alias, 3, "www", "terminated", aliasSets, "resource")); err != nil {
		t.Fatal(err)
	}
	if rs, err := st.ReferencedBy(ctx, e.ID, site); err != nil || len(rs) != 0 {
		t.Errorf("after the referrer's end: %+v, %v", rs, err)
	}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, change("site", site, 3, "blog", "deleting", siteSets, "on_delete")); err != nil {
		t.Fatalf("delete of an unreferenced site: %v", err)
	}
	// A deleting site takes no new referrer.
	_, err = st.ApplyInstanceChange(ctx, e.ID, change("alias", uuidN(2, 2), 1, "www2", "start",
		lsm.Sets{Candidate: map[string]any{"name": "www2", "site": site}}, "create"))
	if _, ok := store.IsAttributeError(err); !ok {
		t.Errorf("a reference to a deleting site: %v", err)
	}
}

// TestInstanceReferenceRace: the create of a referrer and the delete of
// its target, at once, many times: never both. Each pair ends with the
// referrer created and the delete refused, or the delete done and the
// create refused.
func TestInstanceReferenceRace(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	if err := st.RegisterEntities(ctx, e.ID, "h1", relationEntities()); err != nil {
		t.Fatal(err)
	}
	const pairs = 200
	created, deleted := 0, 0
	for i := range pairs {
		site, alias := uuidN(1, i), uuidN(2, i)
		name := fmt.Sprintf("s%d", i)
		siteSets := lsm.Sets{Active: map[string]any{"name": name}}
		if _, err := st.ApplyInstanceChange(ctx, e.ID, change("site", site, 1, name, "up", siteSets, "create")); err != nil {
			t.Fatal(err)
		}
		ref := name
		if i%2 == 1 {
			ref = site // by id, too
		}
		var createErr, deleteErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, createErr = st.ApplyInstanceChange(ctx, e.ID, change("alias", alias, 1, "a"+name, "start",
				lsm.Sets{Candidate: map[string]any{"name": "a" + name, "site": ref}}, "create"))
		}()
		go func() {
			defer wg.Done()
			_, deleteErr = st.ApplyInstanceChange(ctx, e.ID, change("site", site, 2, name, "deleting", siteSets, "on_delete"))
		}()
		wg.Wait()
		_, isAttr := store.IsAttributeError(createErr)
		var re *store.ReferencedError
		switch {
		case createErr == nil && errors.As(deleteErr, &re):
			created++
		case deleteErr == nil && isAttr:
			deleted++
		default:
			t.Fatalf("pair %d: create: %v; delete: %v", i, createErr, deleteErr)
		}
		// What the tables say agrees.
		s, err := st.GetInstance(ctx, e.ID, "site", site)
		if err != nil {
			t.Fatal(err)
		}
		_, aliasErr := st.GetInstance(ctx, e.ID, "alias", alias)
		if (s.State == "deleting") == (aliasErr == nil) {
			t.Fatalf("pair %d: site %s, alias %v", i, s.State, aliasErr)
		}
	}
	t.Logf("%d pairs: the referrer won %d, the delete %d", pairs, created, deleted)
}
