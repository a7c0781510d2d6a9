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

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// decode decodes a version document.
func decode(t *testing.T, doc string) intent.Version {
	t.Helper()
	v, err := intent.DecodeBytes([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// versionIDs are the ids of a version's resources, sorted.
func versionIDs(t *testing.T, st *store.Store, envID string, version int64) []string {
	t.Helper()
	rs, err := st.VersionResources(context.Background(), envID, version, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// TestFullExportKeepsLiveInstances: a full export made without the
// service inventory (intend export of an unchanged model) keeps the
// resource sets of live instances, drops those of deleted ones, takes a
// set it holds itself. Before, it dropped every instance's resources while the
// instances stayed up (issue 14, A.1).
func TestFullExportKeepsLiveInstances(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	a, b := liveWebDeletedDB(t, st, e)
	const shared = `{"id": "fs::File[h,path=/shared]", "attributes": {"path": "/shared"}}`
	if _, err := st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [`+shared+`]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExportPartial(ctx, e.ID, decode(t, `{"resources": [
		{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a"}, "resource_set": "vm/`+a+`"},
		{"id": "fs::File[h,path=/b]", "attributes": {"path": "/b"}, "resource_set": "vm/`+b+`"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	// The unchanged model, exported whole: a's set stays, b's (deleted) goes.
	info, err := st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [`+shared+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(versionIDs(t, st, e.ID, info.Version), " "); got != "fs::File[h,path=/a] fs::File[h,path=/shared]" ||
		info.KeptInstanceResources != 1 || info.ChangedCount != 1 {
		t.Errorf("full export: %s (%+v), want the shared file and a's kept, b's dropped", got, info)
	}

	// An export that holds a's set (compiled with the inventory) is taken
	// as it is.
	info, err = st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [`+shared+`,
		{"id": "fs::File[h,path=/a2]", "attributes": {"path": "/a2"}, "resource_set": "vm/`+a+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(versionIDs(t, st, e.ID, info.Version), " "); got != "fs::File[h,path=/a2] fs::File[h,path=/shared]" ||
		info.KeptInstanceResources != 0 {
		t.Errorf("export with a's set: %s (%+v), want the export's own set", got, info)
	}
}

// TestInstanceExportBuildsOnReleased: an instance's partial export builds
// on the released version, not on a newer one a developer exported and
// did not release (issue 14, A.2): the developer's change does not go out
// with the instance's; the instance's set, and the other resources of the
// released version (stored before, their rows reopened), do.
func TestInstanceExportBuildsOnReleased(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	released, err := st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [{"id": "fs::File[h,path=/one]", "attributes": {"path": "/one"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, released.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [{"id": "fs::File[h,path=/two]", "attributes": {"path": "/two"}}]}`)); err != nil {
		t.Fatal(err)
	}
	content, err := st.ResourceSetContent(ctx, e.ID, "vm/a")
	if err != nil || content.BaseVersion != released.Version || content.LastVersion != released.Version+1 {
		t.Errorf("set content = %+v, %v; want it read from the released version", content, err)
	}
	rel, err := st.ExportInstanceSets(ctx, e.ID, decode(t, `{"resources": [{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a"},
		"resource_set": "vm/a"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	info := rel.Version
	if env, err := st.GetEnvironment(ctx, e.ID); err != nil || env.ReleasedVersion == nil || *env.ReleasedVersion != info.Version {
		t.Errorf("released version = %v (%v), want the instance's version %d, released with its export", env.ReleasedVersion, err, info.Version)
	}
	if got := strings.Join(versionIDs(t, st, e.ID, info.Version), " "); got != "fs::File[h,path=/a] fs::File[h,path=/one]" {
		t.Errorf("the instance's version holds %s, want the released /one and the set's /a, not the unreleased /two", got)
	}
	// The developer's version is still there, to release or export again.
	dev, err := st.VersionResources(ctx, e.ID, released.Version+1, "", 100)
	if err != nil || len(dev) != 1 || dev[0].ID != "fs::File[h,path=/two]" {
		t.Errorf("the developer's version = %+v, %v", dev, err)
	}
}

// TestConcurrentInstanceExportsKeepEverySet: instance exports from many
// servers at once (each with a store of its own, as server replicas have)
// lose no set: each export is released with itself, so none builds on a
// released version that lacks another's set.
func TestConcurrentInstanceExportsKeepEverySet(t *testing.T) {
	t.Parallel()
	st, url, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	const n = 24
	stores := make([]*store.Store, 4)
	for i := range stores {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			doc := fmt.Sprintf(`{"resources": [{"id": "fs::File[h,path=/%d]", "attributes": {"path": "/%d"}, "resource_set": "vm/%d"}]}`, i, i, i)
			_, errs[i] = stores[i%len(stores)].ExportInstanceSets(ctx, e.ID, decode(t, doc), nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("export %d: %v", i, err)
		}
	}
	env, err := st.GetEnvironment(ctx, e.ID)
	if err != nil || env.ReleasedVersion == nil {
		t.Fatalf("environment = %+v, %v", env, err)
	}
	if got := versionIDs(t, st, e.ID, *env.ReleasedVersion); len(got) != n {
		t.Fatalf("the released version %d holds %d resources, want all %d sets: %v", *env.ReleasedVersion, len(got), n, got)
	}
}

// TestApplyInstanceChangeTellsARetryFromAWriterBehind: a change whose
// version is written already is a retry when it writes the same state
// and sets (it returns the instance as that version left it, written
// nothing: the answer to the request that wrote it), and a
// writer behind PostgreSQL when it writes something else (a
// *VersionTakenError with the instance's version, an ErrConflict).
func TestApplyInstanceChangeTellsARetryFromAWriterBehind(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	const id = "8f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	change := func(v int64, state string, memory float64) store.InstanceChange {
		return store.InstanceChange{Entity: "vm", ID: id, Version: v, Identity: "web", State: state,
			Sets:  lsm.Sets{Active: map[string]any{"name": "web", "memory": memory}, ActiveVersion: 1},
			Event: json.RawMessage(`{"trigger": "expert"}`)}
	}
	for v, c := range []store.InstanceChange{change(1, "start", 2), change(2, "up", 2), change(3, "update_start", 4)} {
		if a, err := st.ApplyInstanceChange(ctx, e.ID, c); err != nil || !a.Written {
			t.Fatalf("version %d: %+v %v", v+1, a, err)
		}
	}
	again, err := st.ApplyInstanceChange(ctx, e.ID, change(2, "up", 2))
	if err != nil || again.Written || again.Instance.Version != 2 || again.Instance.State != "up" ||
		again.Instance.Active["memory"] != 2.0 {
		t.Fatalf("a retry of version 2: %+v %v, want nothing written and the instance as version 2 left it", again, err)
	}
	if now, err := st.GetInstance(ctx, e.ID, "vm", id); err != nil || now.Version != 3 || now.State != "update_start" {
		t.Fatalf("after the retry: %+v %v, want the instance still at version 3", now, err)
	}
	for _, c := range []store.InstanceChange{change(2, "up", 8), change(3, "up", 4), change(2, "update_start", 2)} {
		_, err := st.ApplyInstanceChange(ctx, e.ID, c)
		var vt *store.VersionTakenError
		if !errors.As(err, &vt) || vt.Current != 3 || vt.Version != c.Version || !errors.Is(err, store.ErrConflict) {
			t.Errorf("another version %d (%s, memory %v): %v, want a *VersionTakenError at version 3",
				c.Version, c.State, c.Sets.Active["memory"], err)
		}
	}
	if inst, err := st.GetInstance(ctx, e.ID, "vm", id); err != nil || inst.Version != 3 || inst.State != "update_start" {
		t.Errorf("instance after the refused writes: %+v %v", inst, err)
	}
}
