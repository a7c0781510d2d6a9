package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestRollbackVersion: rolling back to version 1 makes a new version with
// version 1's resources (a changed one back, a removed one back, an added
// one gone) and releases it; the sets of service instances stay as the
// newest version has them (one created since is kept, one in version 1
// that was deleted since does not come back, a user's set named like
// neither is rolled back like any resource).
func decodePartial(t *testing.T, doc string) intent.Version {
	t.Helper()
	v, _, err := intent.DecodePartial([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRollbackVersion(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	if err := st.RegisterEntities(ctx, e.ID, "h1", []lsm.Entity{vmEntity()}); err != nil {
		t.Fatal(err)
	}
	const gone = "vm/00000000-0000-4000-8000-000000000001"
	const live = "vm/00000000-0000-4000-8000-000000000002"
	v1, err := st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [
		{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "content": "one"}},
		{"id": "fs::File[h,path=/b]", "attributes": {"path": "/b"}},
		{"id": "fs::File[h,path=/u]", "attributes": {"path": "/u", "content": "one"}, "resource_set": "mine/x"},
		{"id": "fs::File[h,path=/gone]", "attributes": {"path": "/gone"}, "resource_set": "`+gone+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, v1.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExportVersion(ctx, e.ID, decode(t, `{"resources": [
		{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a", "content": "two"}},
		{"id": "fs::File[h,path=/c]", "attributes": {"path": "/c"}},
		{"id": "fs::File[h,path=/u]", "attributes": {"path": "/u", "content": "two"}, "resource_set": "mine/x"}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExportInstanceSets(ctx, e.ID, decodePartial(t, `{"resources": [
		{"id": "fs::File[h,path=/live]", "attributes": {"path": "/live"}, "requires": ["fs::File[h,path=/c]"], "resource_set": "`+live+`"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	// /live requires /c, which version 1 lacks: refused, nothing written.
	if _, err := st.RollbackVersion(ctx, e.ID, v1.Version); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("rollback with a kept resource requiring what version 1 lacks: %v, want a conflict", err)
	}
	env, err := st.GetEnvironment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if env.LastVersion != 3 {
		t.Fatalf("a refused rollback wrote a version: last version %d", env.LastVersion)
	}
	inst, err := st.ExportInstanceSets(ctx, e.ID, decode(t, `{"resources": [
		{"id": "fs::File[h,path=/live]", "attributes": {"path": "/live"}, "resource_set": "`+live+`"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}

	rb, err := st.RollbackVersion(ctx, e.ID, v1.Version)
	if err != nil {
		t.Fatal(err)
	}
	if rb.From != 1 || rb.Version.Version != inst.Version.Version+1 || rb.KeptInstanceResources != 1 || rb.AlreadyReleased {
		t.Fatalf("rollback = %+v", rb)
	}
	// /a's content back, /b back, /c gone, /u (a user's set) back: 4 changed.
	if rb.Changed != 4 {
		t.Errorf("changed = %d, want 4", rb.Changed)
	}
	want := []string{"fs::File[h,path=/a]", "fs::File[h,path=/b]", "fs::File[h,path=/live]", "fs::File[h,path=/u]"}
	if got := versionIDs(t, st, e.ID, rb.Version.Version); !slices.Equal(got, want) {
		t.Fatalf("rolled back version holds %v, want %v", got, want)
	}
	env, err = st.GetEnvironment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if env.ReleasedVersion == nil || *env.ReleasedVersion != rb.Version.Version {
		t.Fatalf("released version %v, want %d", env.ReleasedVersion, rb.Version.Version)
	}
	// Apart from the instance's set, the new version is version 1 again.
	d, err := st.DiffVersions(ctx, e.ID, v1.Version, rb.Version.Version)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Added, []string{"fs::File[h,path=/live]"}) || !slices.Equal(d.Removed, []string{"fs::File[h,path=/gone]"}) || len(d.Modified) != 0 {
		t.Fatalf("diff from version 1 to the rollback: %+v", d)
	}

	if _, err := st.RollbackVersion(ctx, e.ID, 99); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rollback to a version that does not exist: %v", err)
	}
}
