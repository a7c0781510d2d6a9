package store_test

import (
	"context"
	"testing"
)

// TestPutModelSourceReplaced: storing a source says whether it became the
// newest in place of another; storing the newest again does not, going
// back to an older one does. A source is unannounced until marked, and
// again once it becomes the newest again; UnannouncedModels lists the
// environment while its newest source is unannounced.
func TestPutModelSourceReplaced(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	listed := func() bool {
		t.Helper()
		ms, err := st.UnannouncedModels(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Environment.ID == e.ID {
				return true
			}
		}
		return false
	}
	for i, c := range []struct {
		hash      string
		replaced  bool
		announced bool // before this put, the newest was marked announced
	}{{"a", true, false}, {"a", false, true}, {"b", true, false}, {"b", false, false}, {"a", true, true}} {
		m, err := st.PutModelSource(ctx, e.ID, c.hash, []byte("archive "+c.hash), 1, "cli")
		if err != nil {
			t.Fatal(err)
		}
		if m.Replaced != c.replaced {
			t.Errorf("put %d (%s): replaced %v, want %v", i, c.hash, m.Replaced, c.replaced)
		}
		// Unannounced unless the newest stayed the newest and was announced.
		if wantNil := c.replaced || !c.announced; (m.AnnouncedAt == nil) != wantNil || listed() != wantNil {
			t.Errorf("put %d (%s): announced_at %v, listed %v; want unannounced %v", i, c.hash, m.AnnouncedAt, listed(), wantNil)
		}
		if i == 0 || i == 3 {
			if err := st.MarkModelAnnounced(ctx, e.ID, c.hash); err != nil {
				t.Fatal(err)
			}
			if listed() {
				t.Errorf("put %d: still listed after MarkModelAnnounced", i)
			}
		}
	}
}
