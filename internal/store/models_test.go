package store_test

import (
	"context"
	"testing"
)

// TestPutModelSourceReplaced: storing a source says whether it became the
// newest in place of another; storing the newest again does not, going
// back to an older one does.
func TestPutModelSourceReplaced(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
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
	}
}
