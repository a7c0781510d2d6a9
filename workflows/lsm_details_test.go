package workflows

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// recordStateUpserts records the IntendInstanceState values the workflow
// upserts.
func recordStateUpserts(env *testsuite.TestWorkflowEnvironment) *[]string {
	var got []string
	key := temporal.NewSearchAttributeKeyKeyword(SearchAttrInstanceState)
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(key); ok {
			got = append(got, v)
		}
	}).Return(nil)
	return &got
}

// TestServiceInstanceUpsertsState: an instance's workflow keeps
// IntendInstanceState equal to the state it rests or waits in, upserting
// it when it differs: a run started with it (a restart from PostgreSQL)
// upserts nothing until it moves; a continued run of an older generation,
// without it, upserts it at once.
func TestServiceInstanceUpsertsState(t *testing.T) {
	t.Parallel()
	// start and acknowledged are passed through by auto transfers;
	// creating waits for the deploy.
	created := []string{"creating", "up"}
	for _, c := range []struct {
		name    string
		in      func() ServiceInstanceInput
		create  bool
		startSA string
		want    []string
	}{
		{"a create, this generation", func() ServiceInstanceInput {
			in := input()
			in.Generation = InstanceGeneration
			return in
		}, true, "", created},
		{"a create, generation 0 under this code (GetVersion)", input, true, "", created},
		{"a restart from PostgreSQL, started with the state", func() ServiceInstanceInput {
			in := upInput()
			in.Generation = InstanceGeneration
			return in
		}, false, "up", nil},
		{"a continued run of generation 1, without the attribute", func() ServiceInstanceInput {
			in := upInput()
			in.Generation = 1
			return in
		}, false, "", []string{"up"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &lsmFake{}
			if !c.create {
				f.seeded(4)
			}
			env := f.env(t)
			got := recordStateUpserts(env)
			in := c.in()
			if err := env.SetTypedSearchAttributesOnStart(
				ServiceInstanceSearchAttributes("prod", "vm", in.InstanceID, c.startSA)); err != nil {
				t.Fatal(err)
			}
			if c.create {
				send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
			}
			cancelAt(env, time.Hour)
			env.ExecuteWorkflow(ServiceInstanceWorkflowName, in)
			wantCanceled(t, env)
			if !slices.Equal(*got, c.want) {
				t.Errorf("upserted states %v, want %v", *got, c.want)
			}
		})
	}
}

// TestServiceInstanceShowsLastError: the current details show the state,
// the version and the last error: here the failed deploy of an update,
// rolled back.
func TestServiceInstanceShowsLastError(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{deploys: map[int][]string{1: {DeployFailed}, 2: {DeployDone}}}).seeded(4)
	env := f.env(t)
	send(env, time.Minute, UpdateUpdate, "u", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "web", "memory": 8.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	got := currentDetails(t, env)
	for _, want := range []string{
		"**vm** `" + testInstance + "` (web): state **up**, version 10",
		"**Last error** at version 8 (state update_failed): transfer resource went to its error state update_failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("details lack %q:\n%s", want, got)
		}
	}
}

func TestInstanceMemo(t *testing.T) {
	t.Parallel()
	m := InstanceMemo("prod", "vm", "6f1c/x")
	if m["instance"] != "/lsm/v1/service_inventory/vm/6f1c%2Fx" || m["log"] != "/lsm/v1/service_inventory/vm/6f1c%2Fx/log" ||
		m["environment"] != "prod" {
		t.Errorf("InstanceMemo = %v", m)
	}
}
