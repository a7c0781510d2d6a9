package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

const testInstance = "6f1c2d3e-0000-4000-8000-000000000001"

func testEntity() lsm.Entity {
	return lsm.Entity{
		Name:     "vm",
		Identity: "name",
		Attributes: []lsm.AttributeSpec{
			{Name: "name", Modifier: lsm.ReadWrite, Required: true},
			{Name: "memory", Modifier: lsm.ReadWriteAlways},
			{Name: "disk", Modifier: lsm.ReadWriteAlways, Default: json.RawMessage(`10`)},
			{Name: "address", Modifier: lsm.ReadOnly},
		},
		Lifecycle: lsm.Simple(),
	}
}

// lsmFake scripts the engine's activities and records their calls.
type lsmFake struct {
	loads       int
	mu          sync.Mutex
	writes      []ApplyTransferInput
	validations []ValidateInstanceInput
	exports     []ExportInstanceInput
	checks      []CheckInstanceDeployInput
	// validate answers the n-th validation (from 1); nil: OK.
	validate func(n int) ValidateInstanceResult
	// deploys are the answers to the checks after the n-th export (from
	// 1), in order; the last one repeats. None: done.
	deploys       map[int][]string
	checksOfExprt map[int]int
}

func (f *lsmFake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes) + len(f.validations) + len(f.exports) + len(f.checks)
}

func (f *lsmFake) states() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, w := range f.writes {
		out = append(out, w.State)
	}
	return out
}

func (f *lsmFake) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	RegisterServiceInstance(env)
	f.checksOfExprt = map[int]int{}
	ApplyTransferActivity.Register(env, func(_ context.Context, in ApplyTransferInput) (ServiceInstanceRecord, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if want := int64(len(f.writes) + 1); in.Version < want {
			// Written before by another transfer (the store's
			// *VersionTakenError).
			return ServiceInstanceRecord{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("version %d was written by another transfer", in.Version), lsm.RejectStale, nil, want-1)
		} else if in.Version != want {
			return ServiceInstanceRecord{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("version %d written, want %d", in.Version, want), lsm.RejectConflict, nil)
		}
		f.writes = append(f.writes, in)
		return ServiceInstanceRecord{ID: in.InstanceID, Entity: in.Entity, Identity: in.Identity, State: in.State,
			Version: in.Version, Sets: in.Sets, Deleted: in.Deleted}, nil
	})
	ValidateInstanceActivity.Register(env, func(_ context.Context, in ValidateInstanceInput) (ValidateInstanceResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.validations = append(f.validations, in)
		if f.validate != nil {
			return f.validate(len(f.validations)), nil
		}
		return ValidateInstanceResult{OK: true}, nil
	})
	AllocateValuesActivity.Register(env, func(_ context.Context, in AllocateValuesInput) (map[string]any, error) {
		// Every allocated attribute gets 64512 (store.AllocateForVersion
		// chooses them).
		out := maps.Clone(in.Attributes)
		out["asn"] = 64512.0
		return out, nil
	})
	ExportInstanceActivity.Register(env, func(_ context.Context, in ExportInstanceInput) (ExportInstanceResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.exports = append(f.exports, in)
		return ExportInstanceResult{Version: int64(len(f.exports)), Changed: true, Resources: 2}, nil
	})
	CheckInstanceDeployActivity.Register(env, func(_ context.Context, in CheckInstanceDeployInput) (CheckInstanceDeployResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.checks = append(f.checks, in)
		n := len(f.exports)
		answers := f.deploys[n]
		i := f.checksOfExprt[n]
		f.checksOfExprt[n]++
		status := DeployDone
		if len(answers) > 0 {
			status = answers[min(i, len(answers)-1)]
		}
		return CheckInstanceDeployResult{Status: status}, nil
	})
	LoadInstanceActivity.Register(env, func(_ context.Context, in LoadInstanceInput) (*InstanceSnapshot, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.loads++
		if len(f.writes) == 0 {
			return nil, nil
		}
		w := f.writes[len(f.writes)-1]
		return &InstanceSnapshot{State: w.State, Version: w.Version, Identity: w.Identity, Sets: w.Sets}, nil
	})
	return env
}

// TestServiceInstanceTakesUpALostCreate: a Temporal server that went down
// as the first workflow task completed kept the workflow's start but not
// the task, and so lost the create update, after its transfers were
// written (start, acknowledged, creating). The workflow, started again
// without its update, finds the instance in PostgreSQL and takes it up
// there: it exports and waits for the deploy, and the instance goes up.
func TestServiceInstanceTakesUpALostCreate(t *testing.T) {
	t.Parallel()
	f := &lsmFake{}
	env := f.env(t)
	f.writes = []ApplyTransferInput{
		{InstanceID: "i1", Entity: "vm", Identity: "web", State: "start", Version: 1},
		{InstanceID: "i1", Entity: "vm", Identity: "web", State: "acknowledged", Version: 2},
		{InstanceID: "i1", Entity: "vm", Identity: "web", State: "creating", Version: 3},
	}
	for i := range f.writes {
		f.writes[i].Sets.Active = map[string]any{"name": "web", "memory": 2.0}
	}
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	if got := strings.Join(f.states(), " "); got != "start acknowledged creating up" || f.loads != 1 {
		t.Errorf("writes %s after %d loads, want the instance taken up at creating and moved up", got, f.loads)
	}
	if len(f.exports) == 0 {
		t.Error("the instance taken up was not exported: its deploy was not waited for")
	}
}

// outcome records an update's fate.
type outcome struct {
	rejected  error
	completed bool
	result    ServiceInstanceRecord
	err       error
}

func send(env *testsuite.TestWorkflowEnvironment, at time.Duration, name, id string, arg any) *outcome {
	o := &outcome{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { o.rejected = err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				o.completed, o.err = true, err
				if r, ok := v.(ServiceInstanceRecord); ok {
					o.result = r
				}
			},
		}, arg)
	}, at)
	return o
}

func input() ServiceInstanceInput {
	return ServiceInstanceInput{EnvironmentID: "env-id", EnvironmentName: "prod", Entity: testEntity(), InstanceID: testInstance}
}

func (o *outcome) mustComplete(t *testing.T, what string) {
	t.Helper()
	if o.rejected != nil || !o.completed || o.err != nil {
		t.Fatalf("%s: rejected %v, completed %v, error %v", what, o.rejected, o.completed, o.err)
	}
}

// cancelAt ends a workflow that would otherwise wait for requests forever.
func cancelAt(env *testsuite.TestWorkflowEnvironment, at time.Duration) {
	env.RegisterDelayedCallback(env.CancelWorkflow, at)
}

func wantStates(t *testing.T, f *lsmFake, want ...string) {
	t.Helper()
	if got := f.states(); !slices.Equal(got, want) {
		t.Fatalf("states written = %v, want %v", got, want)
	}
}

func wantCanceled(t *testing.T, env *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var ce *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("workflow error = %v, want cancelled (it should have waited for requests)", err)
	}
}

// TestServiceInstanceCreateToUp: a create is validated, acknowledged,
// promoted and exported, and is up once its deploy is done (the first
// check finds it pending; the poll timer finds it done).
func TestServiceInstanceCreateToUp(t *testing.T) {
	t.Parallel()
	f := &lsmFake{deploys: map[int][]string{1: {DeployPending, DeployDone}}}
	env := f.env(t)
	create := send(env, 0, CreateUpdate, "key-1", CreateRequest{
		Attributes: map[string]any{"name": "web", "memory": 2.0},
		Request:    &lsm.IdempotentRequest{Key: "key-1", Hash: []byte{1}, Status: 201},
	})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	wantCanceled(t, env)
	create.mustComplete(t, "create")
	if create.result.State != "start" || create.result.Version != 1 || create.result.Identity != "web" {
		t.Errorf("create returned %+v, want version 1 in start with identity web", create.result)
	}
	wantStates(t, f, "start", "acknowledged", "creating", "up")
	w := f.writes
	if w[0].Request == nil || w[0].Request.Key != "key-1" || w[0].Event.Trigger != "create" || w[0].Event.Request != "key-1" {
		t.Errorf("create write = %+v, want the idempotent request passed through", w[0])
	}
	if w[0].Sets.Candidate["disk"] != 10.0 || w[0].Sets.Candidate["memory"] != 2.0 || len(w[0].Sets.Candidate) != 3 {
		t.Errorf("created candidate set %v, want the attributes given and the default disk 10", w[0].Sets.Candidate)
	}
	if w[1].Request != nil || w[1].Event.Trigger != "auto" || w[1].Event.Error {
		t.Errorf("validation write = %+v", w[1])
	}
	if w[2].Sets.Active["name"] != "web" || w[2].Sets.Candidate != nil || !slices.Equal(w[2].Event.Operations, []lsm.Operation{lsm.Promote}) {
		t.Errorf("creating write = %+v, want the candidate promoted", w[2])
	}
	if w[3].Event.Trigger != "resource" || w[3].Version != 4 {
		t.Errorf("up write = %+v", w[3])
	}
	if len(f.validations) != 1 || f.validations[0].Attributes["name"] != "web" || f.validations[0].Attributes["disk"] != 10.0 {
		t.Errorf("validations = %+v", f.validations)
	}
	if len(f.exports) != 1 || f.exports[0].Mode != ExportResources || f.exports[0].InstanceVersion != 3 {
		t.Errorf("exports = %+v, want one of version 3 (creating); up keeps it", f.exports)
	}
	if len(f.checks) != 2 {
		t.Errorf("deploy checks = %d, want 2 (pending, then done)", len(f.checks))
	}
}

// TestServiceInstanceValidationFails: a create the model refuses is
// rejected, with the compile's errors in the log, and nothing is exported.
func TestServiceInstanceValidationFails(t *testing.T) {
	t.Parallel()
	f := &lsmFake{validate: func(int) ValidateInstanceResult {
		return ValidateInstanceResult{Errors: json.RawMessage(`[{"message":"memory: out of bound"}]`)}
	}}
	env := f.env(t)
	create := send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web", "memory": 100.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	wantCanceled(t, env)
	create.mustComplete(t, "create")
	wantStates(t, f, "start", "rejected")
	if r := f.writes[1]; !r.Event.Error || string(r.Errors) != `[{"message":"memory: out of bound"}]` || r.Sets.Candidate["memory"] != 100.0 {
		t.Errorf("rejected write = %+v, want the error transfer with the errors and the candidate kept", r)
	}
	if len(f.exports) != 0 || len(f.checks) != 0 {
		t.Errorf("exports %v, checks %v: a rejected instance has no resources", f.exports, f.checks)
	}
}

// upInput is an instance that is up at version 4, its export made.
func upInput() ServiceInstanceInput {
	in := input()
	active := map[string]any{"name": "web", "memory": 2.0}
	in.Snapshot = &InstanceSnapshot{State: "up", Version: 4, Identity: "web", Sets: lsm.Sets{Active: active},
		Export: &InstanceExport{InstanceVersion: 3, Mode: ExportResources, Attributes: active,
			Result: ExportInstanceResult{Version: 1, Changed: true}}}
	return in
}

// seeded fakes a store that holds versions 1..n already.
func (f *lsmFake) seeded(n int) *lsmFake {
	for i := 1; i <= n; i++ {
		f.writes = append(f.writes, ApplyTransferInput{Version: int64(i), State: "(before)"})
	}
	return f
}

// TestServiceInstanceUpdate: an update of an rw+ attribute is validated,
// promoted, deployed, and the instance is up again.
func TestServiceInstanceUpdate(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	env := f.env(t)
	upd := send(env, time.Minute, UpdateUpdate, "u", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "web", "memory": 4.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	upd.mustComplete(t, "update")
	if upd.result.State != "update_start" || upd.result.Version != 5 {
		t.Errorf("update returned %+v", upd.result)
	}
	wantStates(t, f, "(before)", "(before)", "(before)", "(before)", "update_start", "update_acknowledged", "updating", "up")
	up := f.writes[7]
	if up.Sets.Active["memory"] != 4.0 || up.Sets.Rollback["memory"] != 2.0 || up.Sets.Candidate != nil {
		t.Errorf("up = %+v, want memory 4 active and 2 as rollback", up.Sets)
	}
	if len(f.exports) != 1 || f.exports[0].Attributes["memory"] != 4.0 {
		t.Errorf("exports = %+v, want one, of the new attributes", f.exports)
	}
}

// TestServiceInstanceUpdateDeployFails: a failed deploy of an update
// rolls back to the previous attributes and deploys them again.
func TestServiceInstanceUpdateDeployFails(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{deploys: map[int][]string{1: {DeployFailed}, 2: {DeployPending, DeployPending, DeployDone}}}).seeded(4)
	env := f.env(t)
	upd := send(env, time.Minute, UpdateUpdate, "u", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "web", "memory": 8.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	upd.mustComplete(t, "update")
	wantStates(t, f, "(before)", "(before)", "(before)", "(before)",
		"update_start", "update_acknowledged", "updating", "update_failed", "rolling_back", "up")
	if w := f.writes[7]; !w.Event.Error || w.Event.Trigger != "resource" {
		t.Errorf("update_failed write = %+v, want the resource transfer's error", w)
	}
	up := f.writes[9]
	if up.Sets.Active["memory"] != 2.0 || up.Sets.Candidate["memory"] != 8.0 {
		t.Errorf("up after the rollback = %+v, want 2 active and the failed 8 as candidate", up.Sets)
	}
	if len(f.exports) != 2 || f.exports[0].Attributes["memory"] != 8.0 || f.exports[1].Attributes["memory"] != 2.0 {
		t.Errorf("exports = %+v, want the update's, then the rollback's", f.exports)
	}
}

// TestServiceInstanceDelete: a delete purges the resources, and once that
// deploy is done the instance is terminated, its set removed, and the
// workflow ends.
func TestServiceInstanceDelete(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{deploys: map[int][]string{1: {DeployPending, DeployDone}}}).seeded(4)
	env := f.env(t)
	del := send(env, time.Minute, DeleteUpdate, "d", DeleteRequest{CurrentVersion: 4,
		Request: &lsm.IdempotentRequest{Key: "d", Status: 200}})
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow completed %v, error %v; want it ended after terminated", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	del.mustComplete(t, "delete")
	if del.result.State != "deleting" {
		t.Errorf("delete returned %+v", del.result)
	}
	wantStates(t, f, "(before)", "(before)", "(before)", "(before)", "deleting", "terminated")
	if !f.writes[5].Deleted || f.writes[4].Deleted {
		t.Errorf("deleted flags = %v, %v; want only terminated deleted", f.writes[4].Deleted, f.writes[5].Deleted)
	}
	if len(f.exports) != 2 || f.exports[0].Mode != ExportPurged || f.exports[1].Mode != ExportRemove {
		t.Errorf("exports = %+v, want purge then remove", f.exports)
	}
}

// TestServiceInstanceValidatorsReject: stale versions, triggers the state
// has no transfer for and modifier violations are rejected before any
// activity runs.
func TestServiceInstanceValidatorsReject(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	before := f.calls()
	env := f.env(t)
	stale := send(env, time.Minute, DeleteUpdate, "a", DeleteRequest{CurrentVersion: 3})
	illegal := send(env, 2*time.Minute, SetStateUpdate, "b", SetStateRequest{CurrentVersion: 4, Target: "creating"})
	rw := send(env, 3*time.Minute, UpdateUpdate, "c", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "other", "memory": 2.0}})
	ro := send(env, 4*time.Minute, UpdateUpdate, "d", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "web", "memory": 2.0, "address": "10.0.0.1", "colour": "red"}})
	exists := send(env, 5*time.Minute, CreateUpdate, "e", CreateRequest{Attributes: map[string]any{"name": "x"}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	if n := f.calls(); n != before {
		t.Fatalf("%d activity calls, want none: %v", n-before, f.states())
	}
	check := func(name string, o *outcome, typ string, details func(*temporal.ApplicationError)) {
		t.Helper()
		var ae *temporal.ApplicationError
		if o.completed || !errors.As(o.rejected, &ae) || ae.Type() != typ {
			t.Errorf("%s: rejected %v (completed %v), want an application error %q", name, o.rejected, o.completed, typ)
			return
		}
		if details != nil {
			details(ae)
		}
	}
	check("stale", stale, lsm.RejectStale, func(ae *temporal.ApplicationError) {
		var v int64
		if err := ae.Details(&v); err != nil || v != 4 {
			t.Errorf("stale details = %d %v, want the current version 4", v, err)
		}
	})
	check("illegal", illegal, lsm.RejectIllegal, func(ae *temporal.ApplicationError) {
		var d IllegalDetails
		if err := ae.Details(&d); err != nil || d.State != "up" ||
			!slices.Equal(d.Allowed, []lsm.Event{{Trigger: lsm.OnUpdate}, {Trigger: lsm.OnDelete}}) {
			t.Errorf("illegal details = %+v %v, want state up allowing on_update and on_delete", d, err)
		}
	})
	check("rw attribute changed", rw, lsm.RejectInvalid, func(ae *temporal.ApplicationError) {
		var ps []lsm.AttributeProblem
		if err := ae.Details(&ps); err != nil || len(ps) != 1 || ps[0].Attribute != "name" || ps[0].Reason != lsm.ReasonNotUpdatable {
			t.Errorf("invalid details = %+v %v, want name not updatable", ps, err)
		}
	})
	check("read-only and unknown attributes", ro, lsm.RejectInvalid, func(ae *temporal.ApplicationError) {
		var ps []lsm.AttributeProblem
		if err := ae.Details(&ps); err != nil || len(ps) != 2 || ps[0].Attribute != "address" || ps[0].Reason != lsm.ReasonReadOnly ||
			ps[1].Attribute != "colour" || ps[1].Reason != lsm.ReasonUnknown {
			t.Errorf("invalid details = %+v %v, want address read-only and colour unknown", ps, err)
		}
	})
	check("create again", exists, lsm.RejectExists, nil)
}

// TestServiceInstanceCreateInvalid: a create missing a required attribute
// is rejected, nothing is written and the workflow ends.
func TestServiceInstanceCreateInvalid(t *testing.T) {
	t.Parallel()
	f := &lsmFake{}
	env := f.env(t)
	create := send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"memory": 2.0}})
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	var ae *temporal.ApplicationError
	if !errors.As(create.rejected, &ae) || ae.Type() != lsm.RejectInvalid {
		t.Fatalf("create rejected with %v, want invalid", create.rejected)
	}
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil || f.calls() != 0 {
		t.Errorf("completed %v, error %v, calls %d: want the workflow ended without writing", env.IsWorkflowCompleted(),
			env.GetWorkflowError(), f.calls())
	}
}

// TestServiceInstanceBusy: a request that arrives while the instance
// applies a transfer (here: validating the create) is rejected as busy.
func TestServiceInstanceBusy(t *testing.T) {
	t.Parallel()
	f := &lsmFake{}
	env := f.env(t)
	create := send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
	var busy *outcome
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == ValidateInstanceActivity.Name() && busy == nil {
			busy = &outcome{}
			env.UpdateWorkflow(DeleteUpdate, "d", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { busy.rejected = err }, OnAccept: func() {},
				OnComplete: func(any, error) { busy.completed = true },
			}, DeleteRequest{CurrentVersion: 1})
		}
	})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	create.mustComplete(t, "create")
	var ae *temporal.ApplicationError
	if busy == nil || !errors.As(busy.rejected, &ae) || ae.Type() != lsm.RejectBusy {
		t.Fatalf("request during the validation: %+v, want rejected as busy", busy)
	}
}

// TestServiceInstanceContinuesAsNew: after MaxTransfers transfers, the
// workflow continues as new while it waits for a deploy, carrying the
// state, version, sets and the export to wait for.
func TestServiceInstanceContinuesAsNew(t *testing.T) {
	t.Parallel()
	f := &lsmFake{deploys: map[int][]string{1: {DeployPending}}}
	env := f.env(t)
	in := input()
	in.MaxTransfers = 3
	send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, in)
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	var next ServiceInstanceInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	s := next.Snapshot
	if s == nil || s.State != "creating" || s.Version != 3 || s.Identity != "web" || s.Sets.Active["name"] != "web" ||
		s.Export == nil || s.Export.InstanceVersion != 3 || next.MaxTransfers != 3 || next.Entity.Lifecycle.Name != "simple" {
		t.Fatalf("continued with %+v (snapshot %+v)", next, s)
	}

	// The next run waits for the same deploy without exporting again.
	g := (&lsmFake{}).seeded(3)
	env2 := g.env(t)
	cancelAt(env2, time.Hour)
	env2.ExecuteWorkflow(ServiceInstanceWorkflowName, next)
	wantCanceled(t, env2)
	wantStates(t, g, "(before)", "(before)", "(before)", "up")
	if len(g.exports) != 0 || len(g.checks) != 1 {
		t.Errorf("the continued run exported %d times and checked %d, want 0 and 1", len(g.exports), len(g.checks))
	}
}

// TestServiceInstanceDeployedSignal: the signal makes the wait check at
// once, long before the poll timer (backed off to 30 s) would.
func TestServiceInstanceDeployedSignal(t *testing.T) {
	t.Parallel()
	// Checks at the export and after 5, 10, 20 and 30 s of polls (at 65 s)
	// are pending; the next is the signal's, at 70 s, long before the
	// poll's at 95 s.
	f := &lsmFake{deploys: map[int][]string{1: {DeployPending, DeployPending, DeployPending, DeployPending, DeployPending, DeployDone}}}
	env := f.env(t)
	send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
	var upAt time.Time
	var start time.Time
	env.RegisterDelayedCallback(func() { start = env.Now() }, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(DeployedSignal, nil) }, 70*time.Second)
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if info.ActivityType.Name == ApplyTransferActivity.Name() {
			if in, ok := args[0].(ApplyTransferInput); ok && in.State == "up" {
				upAt = env.Now()
			}
		}
	})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	wantCanceled(t, env)
	if upAt.IsZero() || upAt.Sub(start) > 75*time.Second {
		t.Fatalf("up at %v after the start, want right after the signal at 70 s", upAt.Sub(start))
	}
}

// TestServiceInstanceModelChanged: a new model source makes an up
// instance export its resources again (without a transfer), and one
// waiting for its deploy export again and go on waiting, now for the new
// export's deploy.
func TestServiceInstanceModelChanged(t *testing.T) {
	t.Parallel()
	// Export 1 (creating) stays pending until the model changes; export 2
	// (creating again, the new model) is deployed; export 3 is up's, after
	// the second change.
	f := &lsmFake{deploys: map[int][]string{1: {DeployPending}, 2: {DeployDone}}}
	env := f.env(t)
	send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(ModelChangedSignal, "model-2") }, 10*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(ModelChangedSignal, "model-3") }, 10*time.Minute)
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	wantCanceled(t, env)
	wantStates(t, f, "start", "acknowledged", "creating", "up")
	if len(f.exports) != 3 {
		t.Fatalf("%d exports, want 3: creating's, again after the first change, up's after the second", len(f.exports))
	}
	for i, e := range f.exports {
		if e.Mode != ExportResources || e.Attributes["name"] != "web" {
			t.Errorf("export %d = %+v", i+1, e)
		}
	}
	if f.exports[1].InstanceVersion != 3 || f.exports[2].InstanceVersion != 4 {
		t.Errorf("exports made for versions %d and %d, want 3 (creating) and 4 (up)",
			f.exports[1].InstanceVersion, f.exports[2].InstanceVersion)
	}
}

// customLifecycle uses every trigger but auto and on_update (simple's
// tests have those) and the operations simple does not: an api transfer
// that validates, with an error operation; resource transfers out of an
// exporting and a purging state; on_delete; clear candidate, clear
// rollback, clear active.
func customLifecycle() lsm.Lifecycle {
	return lsm.Lifecycle{
		Name: "custom", Start: "review",
		States: map[string]lsm.State{
			"review":   {Name: "review", ModelState: lsm.Designed},
			"rolling":  {Name: "rolling", ModelState: lsm.Active, Export: true},
			"live":     {Name: "live", ModelState: lsm.Active, Export: true},
			"broken":   {Name: "broken", ModelState: lsm.Active, Export: true},
			"removing": {Name: "removing", ModelState: lsm.Active, Purge: true},
			"gone":     {Name: "gone", ModelState: lsm.Inactive, Terminal: true},
		},
		Transfers: []lsm.Transfer{
			{Source: "review", Target: "rolling", Error: "review", Trigger: lsm.API, Validate: true,
				TargetOperation: []lsm.Operation{lsm.ClearRollback}, ErrorOperation: []lsm.Operation{lsm.ClearCandidate}},
			{Source: "rolling", Target: "live", Error: "broken", Trigger: lsm.Resource},
			{Source: "broken", Target: "removing", Trigger: lsm.API},
			{Source: "live", Target: "removing", Trigger: lsm.OnDelete},
			{Source: "removing", Target: "gone", Error: "broken", Trigger: lsm.Resource,
				TargetOperation: []lsm.Operation{lsm.ClearActive}},
		},
	}
}

// TestServiceInstanceCustomLifecycle drives an instance, resumed from a
// snapshot with all three sets, through customLifecycle: a validating api
// transfer that fails (error state, error operation, the errors logged)
// and then succeeds (target operation), a resource transfer, on_delete
// into a purging state whose deploy takes it to the terminal state; each
// write carries the sets exactly as the operations leave them.
func TestServiceInstanceCustomLifecycle(t *testing.T) {
	t.Parallel()
	lc := customLifecycle()
	if err := lc.Check(); err != nil {
		t.Fatalf("the test's lifecycle: %v", err)
	}
	f := (&lsmFake{validate: func(n int) ValidateInstanceResult {
		if n == 1 {
			return ValidateInstanceResult{Errors: json.RawMessage(`[{"message":"no"}]`)}
		}
		return ValidateInstanceResult{OK: true}
	}}).seeded(2)
	env := f.env(t)
	in := input()
	in.Entity.Lifecycle = lc
	cand, act, rb := map[string]any{"name": "web", "memory": 8.0}, map[string]any{"name": "web", "memory": 4.0},
		map[string]any{"name": "web", "memory": 2.0}
	in.Snapshot = &InstanceSnapshot{State: "review", Version: 2, Identity: "web",
		Sets: lsm.Sets{Candidate: cand, Active: act, Rollback: rb}}
	failed := send(env, time.Minute, SetStateUpdate, "s1", SetStateRequest{CurrentVersion: 2, Target: "rolling"})
	passed := send(env, 2*time.Minute, SetStateUpdate, "s2", SetStateRequest{CurrentVersion: 3, Target: "rolling"})
	deleted := send(env, 10*time.Minute, DeleteUpdate, "d", DeleteRequest{CurrentVersion: 5})
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, in)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v: want the workflow ended in the terminal state", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	failed.mustComplete(t, "set_state failing its validation")
	passed.mustComplete(t, "set_state")
	deleted.mustComplete(t, "delete")
	wantStates(t, f, "(before)", "(before)", "review", "rolling", "live", "removing", "gone")

	w := f.writes
	type want struct {
		trigger   string
		err       bool
		sets      lsm.Sets
		operation []lsm.Operation
	}
	for i, x := range []want{
		{"api", true, lsm.Sets{Active: act, Rollback: rb}, []lsm.Operation{lsm.ClearCandidate}},
		{"api", false, lsm.Sets{Active: act}, []lsm.Operation{lsm.ClearRollback}},
		{"resource", false, lsm.Sets{Active: act}, []lsm.Operation{}},
		{"on_delete", false, lsm.Sets{Active: act}, []lsm.Operation{}},
		{"resource", false, lsm.Sets{}, []lsm.Operation{lsm.ClearActive}},
	} {
		got := w[i+2]
		if got.Event.Trigger != x.trigger || got.Event.Error != x.err || !reflect.DeepEqual(got.Sets, x.sets) ||
			!slices.Equal(got.Event.Operations, x.operation) {
			t.Errorf("write %d (%s): trigger %s, error %v, operations %v, sets %+v; want %+v",
				got.Version, got.State, got.Event.Trigger, got.Event.Error, got.Event.Operations, got.Sets, x)
		}
	}
	if string(w[2].Errors) != `[{"message":"no"}]` {
		t.Errorf("the failed validation's errors in the log: %s", w[2].Errors)
	}
	if !w[6].Deleted {
		t.Error("the terminal state's write does not mark the instance deleted")
	}
	var modes []string
	for _, e := range f.exports {
		modes = append(modes, e.Mode)
	}
	if !slices.Equal(modes, []string{ExportResources, ExportPurged, ExportRemove}) {
		t.Errorf("exports %v, want the resources (rolling), purged (removing), the set removed (gone)", modes)
	}
	if len(f.validations) != 2 || !reflect.DeepEqual(f.validations[0].Attributes, cand) ||
		!reflect.DeepEqual(f.validations[1].Attributes, act) {
		t.Errorf("validations %+v, want two: of the candidate set, then (the candidate cleared) of the active one", f.validations)
	}
}

// TestServiceInstanceReadOnlyAttributes: the values the model computes
// for r attributes at a validation are written into the validated set
// (and promoted with it); what a compile gets never holds them, so a
// stale value carried into an update does not reach the model.
func TestServiceInstanceReadOnlyAttributes(t *testing.T) {
	t.Parallel()
	f := &lsmFake{validate: func(n int) ValidateInstanceResult {
		return ValidateInstanceResult{OK: true, ReadOnly: map[string]any{"address": fmt.Sprintf("10.0.0.%d", n)}}
	}}
	env := f.env(t)
	send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
	// The API carries the stored r value over into an update's set.
	send(env, time.Minute, UpdateUpdate, "u", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "web", "memory": 4.0, "disk": 10.0, "address": "10.0.0.1"}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, input())
	wantCanceled(t, env)
	wantStates(t, f, "start", "acknowledged", "creating", "up", "update_start", "update_acknowledged", "updating", "up")
	w := f.writes
	if w[1].Sets.Candidate["address"] != "10.0.0.1" || w[2].Sets.Active["address"] != "10.0.0.1" {
		t.Errorf("after the create's validation: %+v, then %+v; want address 10.0.0.1 validated and promoted", w[1].Sets, w[2].Sets)
	}
	if w[5].Sets.Candidate["address"] != "10.0.0.2" || w[6].Sets.Active["address"] != "10.0.0.2" || w[6].Sets.Rollback["address"] != "10.0.0.1" {
		t.Errorf("after the update's validation: %+v, then %+v; want address 10.0.0.2", w[5].Sets, w[6].Sets)
	}
	for i, v := range f.validations {
		if _, ok := v.Attributes["address"]; ok {
			t.Errorf("validation %d got the r attribute: %v", i+1, v.Attributes)
		}
	}
	for i, e := range f.exports {
		if _, ok := e.Attributes["address"]; ok || e.Attributes["name"] != "web" {
			t.Errorf("export %d got %v, want the active set without the r attribute", i+1, e.Attributes)
		}
	}
}

// TestServiceInstanceLeavesNoTimerBehind: a create whose deploy is
// signalled at once reaches up with no timer left to fire: the lost-create
// waits (20 s, 9m40s) and the deploy poll's timer are cancelled when
// their condition comes first. The SDK's AwaitWithTimeout leaves them
// running, and each fired later as a workflow task that did nothing
// (three per instance: P7's Temporal server work, docs/benchmarks.md).
func TestServiceInstanceLeavesNoTimerBehind(t *testing.T) {
	t.Parallel()
	for _, gen := range []int{0, InstanceGeneration} {
		f := &lsmFake{deploys: map[int][]string{1: {DeployPending, DeployDone}}}
		env := f.env(t)
		send(env, 0, CreateUpdate, "c", CreateRequest{Attributes: map[string]any{"name": "web"}})
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(DeployedSignal, nil) }, 100*time.Millisecond)
		var fired []string
		env.SetOnTimerFiredListener(func(id string) { fired = append(fired, id) })
		cancelAt(env, time.Hour)
		in := input()
		in.Generation = gen
		env.ExecuteWorkflow(ServiceInstanceWorkflowName, in)
		wantCanceled(t, env)
		wantStates(t, f, "start", "acknowledged", "creating", "up")
		if len(fired) != 0 {
			t.Errorf("generation %d: %d timers fired in an hour after the instance was up (ids %v), want none", gen, len(fired), fired)
		}
	}
}

// TestServiceInstanceCatchesUpWithPostgreSQL: the workflow task that took
// an update and wrote update_start, update_acknowledged and updating was
// lost with its worker, and the update with it: the workflow's history
// has the instance up at version 4, PostgreSQL has it updating at 7. A
// request with version 7 is refused as stale and names version 4 (the
// engine then sends SyncSignal); on the signal the workflow reads the
// instance, takes it up at updating, exports, waits for the deploy and
// moves it up at version 8; a second signal finds nothing to take up.
func TestServiceInstanceCatchesUpWithPostgreSQL(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	env := f.env(t)
	updated := map[string]any{"name": "web", "memory": 4.0}
	for i, st := range []string{"update_start", "update_acknowledged", "updating"} {
		in := ApplyTransferInput{Version: int64(5 + i), State: st, Identity: "web",
			Sets: lsm.Sets{Active: updated, Rollback: map[string]any{"name": "web", "memory": 2.0}}}
		f.writes = append(f.writes, in)
	}
	stale := send(env, time.Minute, UpdateUpdate, "u1", UpdateRequest{CurrentVersion: 7,
		Attributes: map[string]any{"name": "web", "memory": 8.0}})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SyncSignal, nil) }, 2*time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SyncSignal, nil) }, 3*time.Minute)
	later := send(env, 4*time.Minute, UpdateUpdate, "u2", UpdateRequest{CurrentVersion: 8,
		Attributes: map[string]any{"name": "web", "memory": 8.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	var ae *temporal.ApplicationError
	var v int64
	if !errors.As(stale.rejected, &ae) || ae.Type() != lsm.RejectStale || ae.Details(&v) != nil || v != 4 {
		t.Fatalf("the request with version 7 before the sync: %v, want refused as stale naming version 4", stale.rejected)
	}
	later.mustComplete(t, "the update after the sync")
	wantStates(t, f, "(before)", "(before)", "(before)", "(before)", "update_start", "update_acknowledged", "updating",
		"up", "update_start", "update_acknowledged", "updating", "up")
	if up := f.writes[7]; up.Sets.Active["memory"] != 4.0 || up.Event.Trigger != "resource" {
		t.Errorf("the write after the sync = %+v, want the resource transfer up with memory 4", up)
	}
	if f.loads != 2 {
		t.Errorf("%d reads of the instance, want one per signal", f.loads)
	}
	if len(f.exports) == 0 || f.exports[0].InstanceVersion != 7 || f.exports[0].Attributes["memory"] != 4.0 {
		t.Errorf("exports = %+v, want the updating version's set exported first", f.exports)
	}
}

// TestServiceInstanceCatchesUpWhenItsVersionIsTaken: as above, but the
// next request comes from a client that read version 4 before the lost
// task. The workflow takes it (it is at 4), and its write finds version 5
// taken by the lost task's transfer: the request is refused as stale,
// naming version 7, and the workflow catches up by itself, with no
// signal, and moves the instance up.
func TestServiceInstanceCatchesUpWhenItsVersionIsTaken(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	env := f.env(t)
	updated := map[string]any{"name": "web", "memory": 4.0}
	for i, st := range []string{"update_start", "update_acknowledged", "updating"} {
		f.writes = append(f.writes, ApplyTransferInput{Version: int64(5 + i), State: st, Identity: "web",
			Sets: lsm.Sets{Active: updated, Rollback: map[string]any{"name": "web", "memory": 2.0}}})
	}
	old := send(env, time.Minute, UpdateUpdate, "u1", UpdateRequest{CurrentVersion: 4,
		Attributes: map[string]any{"name": "web", "memory": 8.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	var ae *temporal.ApplicationError
	var v int64
	if old.rejected != nil || !errors.As(old.err, &ae) || ae.Type() != lsm.RejectStale || ae.Details(&v) != nil || v != 7 {
		t.Fatalf("the request at version 4: rejected %v, error %v; want it to fail as stale naming version 7", old.rejected, old.err)
	}
	wantStates(t, f, "(before)", "(before)", "(before)", "(before)", "update_start", "update_acknowledged", "updating", "up")
	if f.loads != 1 {
		t.Errorf("%d reads of the instance, want 1", f.loads)
	}
}
