package activities

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

// newTestEnv opens a store on a database of the test's own, closed when
// the test ends, and creates project "p" and in it environment "e" with
// the given settings (nil: none).
func newTestEnv(t *testing.T, settings map[string]json.RawMessage) (*store.Store, store.Environment) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e", Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	return st, e
}
