package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// modelOf is a model whose archive and hash are named hash, with entities
// of the given names (vm first, as vmEntity, with attrs).
func modelOf(hash string, names []string, attrs ...lsm.AttributeSpec) store.NewModel {
	m := store.NewModel{Hash: hash, Archive: []byte("archive " + hash), Files: 1, Origin: "cli"}
	for _, n := range names {
		e := vmEntity(attrs...)
		e.Name = n
		m.Entities = append(m.Entities, e)
	}
	return m
}

// catalogOf returns the environment's catalog: entity names, sorted, and
// the model hashes they record.
func catalogOf(t *testing.T, st *store.Store, envID string) (names, hashes []string) {
	t.Helper()
	es, err := st.ListEntities(context.Background(), envID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		names = append(names, e.Name)
		if !slices.Contains(hashes, e.ModelHash) {
			hashes = append(hashes, e.ModelHash)
		}
	}
	return names, hashes
}

// TestPutModelIsAtomic: PutModel writes the catalog and the model source
// in one transaction; whatever refuses or fails leaves both as they were.
func TestPutModelIsAtomic(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	m, err := st.PutModel(ctx, e.ID, modelOf("a", []string{"vm"}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Hash != "a" || !m.Replaced || m.AnnouncedAt != nil || m.Origin != "cli" {
		t.Errorf("first model: %+v", m)
	}
	// A live instance of vm, which some models below would break.
	const id = "7a1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "up",
		Identity: "web", Sets: lsm.Sets{Active: map[string]any{"name": "web", "memory": 2.0}}}); err != nil {
		t.Fatal(err)
	}
	retyped := []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type": "string"}`), Required: true},
		{Name: "memory", Modifier: lsm.ReadWriteAlways, Schema: json.RawMessage(`{"type": "string"}`)},
	}
	badOrigin := modelOf("c", []string{"vm", "db"})
	badOrigin.Origin = "elsewhere"
	for _, tc := range []struct {
		why      string
		model    store.NewModel
		breaking bool // the error is a *BreakingChangesError, else any
	}{
		{"the model drops the live instance's entity", modelOf("b", []string{"db"}), true},
		{"the model retypes an attribute the instance has", modelOf("b", []string{"vm", "db"}, retyped...), true},
		// The catalog (vm kept, db added) is written before the source,
		// which model_sources' check on origin refuses.
		{"the source is refused after the catalog was written", badOrigin, false},
	} {
		_, err := st.PutModel(ctx, e.ID, tc.model)
		be, isBreaking := errors.AsType[*store.BreakingChangesError](err)
		if err == nil || isBreaking != tc.breaking || (isBreaking && be.Changes[0].Instances[0] != id) {
			t.Errorf("%s: %v, want an error (breaking %v)", tc.why, err, tc.breaking)
		}
		if latest, err := st.LatestModelSource(ctx, e.ID); err != nil || latest.Hash != "a" {
			t.Errorf("%s: newest source %q, %v; want a", tc.why, latest.Hash, err)
		}
		if _, err := st.ModelArchive(ctx, e.ID, tc.model.Hash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: source %s stored (%v)", tc.why, tc.model.Hash, err)
		}
		names, hashes := catalogOf(t, st, e.ID)
		if !slices.Equal(names, []string{"vm"}) || !slices.Equal(hashes, []string{"a"}) {
			t.Errorf("%s: catalog %v from %v; want [vm] from [a]", tc.why, names, hashes)
		}
		if vm, err := st.GetEntity(ctx, e.ID, "vm"); err != nil || !strings.Contains(string(vm.Attributes[1].Schema), `"integer"`) {
			t.Errorf("%s: vm %+v, %v", tc.why, vm.Attributes, err)
		}
	}
	// A compatible model replaces both.
	m, err = st.PutModel(ctx, e.ID, modelOf("d", []string{"vm", "db"}))
	if err != nil || m.Hash != "d" || !m.Replaced || m.AnnouncedAt != nil {
		t.Fatalf("compatible model: %+v, %v", m, err)
	}
	if names, hashes := catalogOf(t, st, e.ID); !slices.Equal(names, []string{"db", "vm"}) || !slices.Equal(hashes, []string{"d"}) {
		t.Errorf("after the compatible model: catalog %v from %v", names, hashes)
	}
}

// TestPutModelConcurrently: models stored concurrently in one environment
// leave the catalog of the newest model source, whatever the interleaving
// (run with -count=20). Each model has entities of its own, and each
// entity records the model it came from.
func TestPutModelConcurrently(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	const writers, rounds = 8, 3
	entities := map[string][]string{} // hash → entity names, sorted
	for w := range writers {
		for r := range rounds {
			hash := fmt.Sprintf("m%d-%d", w, r)
			entities[hash] = []string{fmt.Sprintf("own%d-%d", w, r), "vm"}
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Go(func() {
			<-start
			for r := range rounds {
				hash := fmt.Sprintf("m%d-%d", w, r)
				if _, err := st.PutModel(ctx, e.ID, modelOf(hash, entities[hash])); err != nil {
					errs <- fmt.Errorf("model %s: %w", hash, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	latest, err := st.LatestModelSource(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	names, hashes := catalogOf(t, st, e.ID)
	if !slices.Equal(names, entities[latest.Hash]) || !slices.Equal(hashes, []string{latest.Hash}) {
		t.Errorf("newest source %s (entities %v), catalog %v from models %v", latest.Hash, entities[latest.Hash], names, hashes)
	}
	// Stored, none is released: the reconciler announces none.
	if hash := listed(t, st, e); hash != "" {
		t.Errorf("unannounced %s; uploads are no release", hash)
	}
}

// TestStagedModelWaitsForItsRelease: a staged upload (a dry-run's, a plain
// export's) leaves the catalog as the released model has it, refuses what
// would break live instances all the same, and becomes the catalog when a
// version built from it is released.
func TestStagedModelWaitsForItsRelease(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	staged := func(m store.NewModel) store.NewModel { m.Stage = true; return m }
	release := func(hash string) {
		t.Helper()
		info, err := st.ExportVersionOf(ctx, e.ID, files(t, 1, map[int]string{0: hash}), hash)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
			t.Fatal(err)
		}
	}
	catalog := func(want []string, wantHash, why string) {
		t.Helper()
		if names, hashes := catalogOf(t, st, e.ID); !slices.Equal(names, want) || !slices.Equal(hashes, []string{wantHash}) {
			t.Errorf("%s: catalog %v from %v; want %v from %s", why, names, hashes, want, wantHash)
		}
	}
	// No source released yet: a staged upload registers at once.
	if _, err := st.PutModel(ctx, e.ID, staged(modelOf("a", []string{"vm"}))); err != nil {
		t.Fatal(err)
	}
	catalog([]string{"vm"}, "a", "first staged upload")
	release("a")
	const id = "7a1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: 1, State: "up",
		Identity: "web", Sets: lsm.Sets{Active: map[string]any{"name": "web", "memory": 2.0}}}); err != nil {
		t.Fatal(err)
	}
	// Staged once a source is released: the catalog stays a's.
	if _, err := st.PutModel(ctx, e.ID, staged(modelOf("b", []string{"vm", "db"}))); err != nil {
		t.Fatal(err)
	}
	catalog([]string{"vm"}, "a", "staged b")
	// Breaking the live instance is refused when staged too.
	if _, err := st.PutModel(ctx, e.ID, staged(modelOf("c", []string{"db"}))); !errors.As(err, new(*store.BreakingChangesError)) {
		t.Errorf("staged model dropping vm: %v, want a *BreakingChangesError", err)
	}
	catalog([]string{"vm"}, "a", "refused c")
	// The release of a version of b makes b's entities the catalog, once.
	release("b")
	catalog([]string{"db", "vm"}, "b", "b released")
	release("b")
	catalog([]string{"db", "vm"}, "b", "b released again")
	// Staged without db while no db is live; a db instance created
	// before the release makes the release break it: refused, and
	// nothing is released.
	if _, err := st.PutModel(ctx, e.ID, staged(modelOf("d", []string{"vm"}))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "db", ID: "8b2d2c9f-5f54-4a8b-8b66-1b2c3d4e5f60",
		Version: 1, State: "up", Identity: "main", Sets: lsm.Sets{Active: map[string]any{"name": "main", "memory": 2.0}}}); err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportVersionOf(ctx, e.ID, files(t, 1, map[int]string{0: "d"}), "d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); !errors.As(err, new(*store.BreakingChangesError)) {
		t.Errorf("release of d with a live db: %v, want a *BreakingChangesError", err)
	}
	catalog([]string{"db", "vm"}, "b", "d refused at its release")
	if env, err := st.GetEnvironment(ctx, e.ID); err != nil || env.ReleasedVersion == nil || *env.ReleasedVersion == info.Version {
		t.Errorf("d refused at its release: released version %v, %v", env.ReleasedVersion, err)
	}
}
