// Package storetest sets up stores for tests: an environment on a
// database of the test's own, and a released version with its deploy
// run planned.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

// Env opens a store on a database of the test's own, closed when the test
// ends, and creates project "p" and in it environment "e" with the given
// settings (nil: none).
func Env(t testing.TB, settings map[string]json.RawMessage) (*store.Store, store.Environment) {
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

// Things returns n resources test::Thing[a,name=tNNN] (JSON objects).
func Things(n int) []string {
	rs := make([]string, n)
	for i := range rs {
		rs[i] = fmt.Sprintf(`{"id":"test::Thing[a,name=t%03d]","attributes":{"name":"t%03d","v":"1"}}`, i, i)
	}
	return rs
}

// Released exports and releases a version of resources (JSON objects) in
// a fresh environment (Env) and plans its deploy run.
func Released(t testing.TB, resources []string) (*store.Store, store.Environment, int64, store.Plan) {
	t.Helper()
	return ReleasedGrouped(t, resources, nil)
}

// ReleasedGrouped is Released with the run's agents grouped by group
// (store.PlanDeployGrouped).
func ReleasedGrouped(t testing.TB, resources []string, group store.Grouper) (*store.Store, store.Environment, int64, store.Plan) {
	t.Helper()
	ctx := context.Background()
	st, e := Env(t, nil)
	v, err := intent.DecodeBytes([]byte(`{"resources":[` + strings.Join(resources, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportVersion(ctx, e.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := st.TakeRequests(ctx, e.ID, "test", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	p, err := st.PlanDeployGrouped(ctx, e.ID, take.Run.Run, store.BatchLimits{MaxResources: 1000}, store.Caller{}, group)
	if err != nil {
		t.Fatal(err)
	}
	return st, e, take.Run.Run, p
}
