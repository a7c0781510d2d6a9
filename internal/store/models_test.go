package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestPutModelSourceReplaced: storing a source says whether it became the
// newest in place of another; storing the newest again does not, going
// back to an older one does. An upload is announced to nobody:
// UnannouncedModels never lists an environment for a source only stored.
func TestPutModelSourceReplaced(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	for i, c := range []struct {
		hash     string
		replaced bool
	}{{"a", true}, {"a", false}, {"b", true}, {"b", false}, {"a", true}} {
		m, err := st.PutModelSource(ctx, e.ID, c.hash, []byte("archive "+c.hash), 1, "cli")
		if err != nil {
			t.Fatal(err)
		}
		if m.Replaced != c.replaced {
			t.Errorf("put %d (%s): replaced %v, want %v", i, c.hash, m.Replaced, c.replaced)
		}
		if m.AnnouncedAt != nil || listed(t, st, e) != "" {
			t.Errorf("put %d (%s): announced_at %v, listed %q; an upload is no release", i, c.hash, m.AnnouncedAt, listed(t, st, e))
		}
	}
}

// listed is the model source UnannouncedModels lists for e ("": none).
func listed(t *testing.T, st *store.Store, e store.Environment) string {
	t.Helper()
	ms, err := st.UnannouncedModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Environment.ID == e.ID {
			return m.Hash
		}
	}
	return ""
}

// TestReleaseMakesTheModel: the service instances' model is the newest
// source a released version was built from (before any such release,
// the newest uploaded). Releasing a version of a source makes it theirs
// and unannounced (Release.Model, UnannouncedModels) until marked;
// releasing another version of the same source announces nothing again;
// going back to an older source does. A version of no source (an
// instance's export, a JSON alone) changes nothing. A halted environment
// is not listed (its resume announces). The released source outlives
// the uploads after it that pruning would otherwise drop.
func TestReleaseMakesTheModel(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	put := func(hash string) {
		t.Helper()
		if _, err := st.PutModelSource(ctx, e.ID, hash, []byte("archive "+hash), 1, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	model := func() string {
		t.Helper()
		m, err := st.ReleasedModelSource(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m.Hash
	}
	n := 0
	release := func(hash string) store.Release {
		t.Helper()
		n++
		info, err := st.ExportVersionOf(ctx, e.ID, files(t, 1, map[int]string{0: fmt.Sprint(n)}), hash)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := st.ReleaseVersion(ctx, e.ID, info.Version)
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}

	put("a")
	put("b")
	if got := model(); got != "b" {
		t.Errorf("before any release: model %q, want the newest upload b", got)
	}
	if rel := release("a"); rel.Model != "a" || listed(t, st, e) != "a" || model() != "a" {
		t.Errorf("release of a version of a: model %q, listed %q, instances' %q; want a unannounced", rel.Model, listed(t, st, e), model())
	}
	if err := st.MarkModelAnnounced(ctx, e.ID, "a"); err != nil || listed(t, st, e) != "" {
		t.Errorf("after MarkModelAnnounced: listed %q, %v", listed(t, st, e), err)
	}
	put("c") // uploaded, not released: the instances keep a
	if rel := release("a"); rel.Model != "" || listed(t, st, e) != "" || model() != "a" {
		t.Errorf("another version of a: model %q, listed %q, instances' %q; want a, nothing to announce", rel.Model, listed(t, st, e), model())
	}
	if rel := release(""); rel.Model != "" || model() != "a" {
		t.Errorf("a version of no source: model %q, instances' %q; want a", rel.Model, model())
	}
	if rel := release("b"); rel.Model != "b" || model() != "b" {
		t.Errorf("release of b: model %q, instances' %q", rel.Model, model())
	}
	if err := st.MarkModelAnnounced(ctx, e.ID, "b"); err != nil {
		t.Fatal(err)
	}
	if rel := release("a"); rel.Model != "a" || listed(t, st, e) != "a" || model() != "a" {
		t.Errorf("back to a: model %q, listed %q, instances' %q", rel.Model, listed(t, st, e), model())
	}
	if _, err := st.SetHalted(ctx, e.ID, true); err != nil || listed(t, st, e) != "" {
		t.Errorf("halted: listed %q, %v; want none until resumed", listed(t, st, e), err)
	}
	if hash, err := st.UnannouncedModelOf(ctx, e.ID); err != nil || hash != "a" {
		t.Errorf("UnannouncedModelOf = %q, %v; want a (for the resume)", hash, err)
	}
	if _, err := st.ExportVersionOf(ctx, e.ID, files(t, 1, nil), "nope"); err == nil {
		t.Error("a version of a source never stored: no error")
	}
	for i := range 8 {
		put(fmt.Sprint("u", i))
	}
	if _, err := st.ModelArchive(ctx, e.ID, "a"); err != nil || model() != "a" {
		t.Errorf("the released source after 8 uploads: %v, instances' %q", err, model())
	}
}
