package store

import (
	"context"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/testenv"
)

// internalEnv opens a store on a fresh database (closed when tb ends)
// and creates project p with environment name in it; url is the
// database's, for a connection of the test's own.
func internalEnv(tb testing.TB, name string) (st *Store, e Environment, url string) {
	tb.Helper()
	ctx := context.Background()
	url = testenv.Database(tb)
	st, err := Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		tb.Fatal(err)
	}
	if e, err = st.CreateEnvironment(ctx, NewEnvironment{Project: "p", Name: name}); err != nil {
		tb.Fatal(err)
	}
	return st, e, url
}

// releasedRun exports and releases a version of resources (the JSON of
// {"resources": [...]}) in environment e and takes its deploy run.
func releasedRun(tb testing.TB, st *Store, e Environment, resources string) DeployRun {
	tb.Helper()
	ctx := context.Background()
	v, err := intent.DecodeBytes([]byte(resources))
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.ExportVersion(ctx, e.ID, v)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		tb.Fatal(err)
	}
	take, err := st.TakeRequests(ctx, e.ID, "t", nil, false)
	if err != nil || take.Run == nil {
		tb.Fatalf("take = %+v, %v", take, err)
	}
	return *take.Run
}
