package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/internal/lsm"
)

// v2Entity is testEntity at version 2, memory renamed ram.
func v2Entity() lsm.Entity {
	e := testEntity()
	e.Version = 2
	e.Attributes = []lsm.AttributeSpec{
		{Name: "name", Modifier: lsm.ReadWrite, Required: true},
		{Name: "ram", Modifier: lsm.ReadWriteAlways},
		{Name: "label", Modifier: lsm.ReadOnly},
	}
	return e
}

// TestServiceInstanceMigrate: a migration is validated and exported as
// the target version, and the promote makes the instance of it; a later
// update edits the version 2 set.
func TestServiceInstanceMigrate(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	env := f.env(t)
	mig := send(env, time.Minute, MigrateUpdate, "m", MigrateRequest{CurrentVersion: 4, Entity: v2Entity(),
		Attributes: map[string]any{"name": "web", "ram": 2.0}})
	upd := send(env, 2*time.Minute, UpdateUpdate, "u", UpdateRequest{CurrentVersion: 8,
		Attributes: map[string]any{"name": "web", "ram": 3.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	mig.mustComplete(t, "migrate")
	upd.mustComplete(t, "update after the migration")
	if mig.result.Sets.CandidateVersion != 2 || mig.result.State != "update_start" {
		t.Errorf("migrate returned %+v", mig.result)
	}
	if w := f.writes[4]; w.Event.MigrateTo != 2 || w.Event.Trigger != "on_update" {
		t.Errorf("the migration's write = %+v", w.Event)
	}
	if up := f.writes[7]; up.Sets.ActiveVersion != 2 || lsm.EntityVersion(up.Sets.RollbackVersion) != 1 || up.Sets.EntityVersion() != 2 {
		t.Errorf("up after the migration = %+v", up.Sets)
	}
	if v := f.validations[0]; v.EntityVersion != 2 || v.Attributes["ram"] != 2.0 {
		t.Errorf("validation = %+v, want version 2's attributes", v)
	}
	if e := f.exports[0]; e.EntityVersion != 2 || e.Attributes["ram"] != 2.0 {
		t.Errorf("export = %+v, want version 2's", e)
	}
	// The update is of version 2 (ram is its rw+ attribute).
	if up := f.writes[len(f.writes)-1]; up.State != "up" || up.Sets.Active["ram"] != 3.0 || up.Sets.ActiveVersion != 2 ||
		up.Sets.RollbackVersion != 2 {
		t.Errorf("up after the update = %+v", up.Sets)
	}
}

// TestServiceInstanceMigrateDeployFails: a migration whose deploy fails
// rolls back to version 1 with its attributes, exported as version 1.
func TestServiceInstanceMigrateDeployFails(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{deploys: map[int][]string{1: {DeployFailed}}}).seeded(4)
	env := f.env(t)
	mig := send(env, time.Minute, MigrateUpdate, "m", MigrateRequest{CurrentVersion: 4, Entity: v2Entity(),
		Attributes: map[string]any{"name": "web", "ram": 2.0}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	mig.mustComplete(t, "migrate")
	wantStates(t, f, "(before)", "(before)", "(before)", "(before)",
		"update_start", "update_acknowledged", "updating", "update_failed", "rolling_back", "up")
	up := f.writes[9]
	if lsm.EntityVersion(up.Sets.ActiveVersion) != 1 || up.Sets.Active["memory"] != 2.0 || up.Sets.CandidateVersion != 2 || up.Sets.EntityVersion() != 1 {
		t.Errorf("up after the rollback = %+v, want version 1 active, the migration as candidate", up.Sets)
	}
	if len(f.exports) != 2 || f.exports[1].EntityVersion != 1 || f.exports[1].Attributes["memory"] != 2.0 {
		t.Errorf("exports = %+v, want the rollback's of version 1", f.exports)
	}
}

// TestServiceInstanceMigrateRefused: to the instance's own version, or
// another entity, is invalid.
func TestServiceInstanceMigrateRefused(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	env := f.env(t)
	same := send(env, time.Minute, MigrateUpdate, "same", MigrateRequest{CurrentVersion: 4, Entity: testEntity(),
		Attributes: map[string]any{"name": "web"}})
	other := v2Entity()
	other.Name = "db"
	wrong := send(env, 2*time.Minute, MigrateUpdate, "other", MigrateRequest{CurrentVersion: 4, Entity: other,
		Attributes: map[string]any{"name": "web"}})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	for _, o := range []*outcome{same, wrong} {
		if o.rejected == nil && o.err == nil {
			t.Errorf("accepted: %+v", o.result)
		}
	}
	if len(f.writes) != 4 {
		t.Errorf("%d writes, want none after the seeded 4", len(f.writes))
	}
}

// TestServiceInstanceMigrateAllocates: a migration to a version with an
// allocated attribute asks for its value before the validation, which
// gets it; a request that arrives while the value is asked for is
// refused as busy (the instance must not move on meanwhile).
func TestServiceInstanceMigrateAllocates(t *testing.T) {
	t.Parallel()
	f := (&lsmFake{}).seeded(4)
	env := f.env(t)
	target := v2Entity()
	target.Attributes = append(target.Attributes, lsm.AttributeSpec{Name: "asn", Modifier: lsm.ReadOnly, Allocate: "asn"})
	mig := send(env, time.Minute, MigrateUpdate, "m", MigrateRequest{CurrentVersion: 4, Entity: target,
		Attributes: map[string]any{"name": "web", "ram": 2.0}})
	var busy *outcome
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == AllocateValuesActivity.Name() && busy == nil {
			busy = &outcome{}
			env.UpdateWorkflow(DeleteUpdate, "d", &testsuite.TestUpdateCallback{
				OnReject: func(err error) { busy.rejected = err }, OnAccept: func() {},
				OnComplete: func(any, error) { busy.completed = true },
			}, DeleteRequest{CurrentVersion: 4})
		}
	})
	cancelAt(env, time.Hour)
	env.ExecuteWorkflow(ServiceInstanceWorkflowName, upInput())
	wantCanceled(t, env)
	mig.mustComplete(t, "migrate")
	var ae *temporal.ApplicationError
	if busy == nil || !errors.As(busy.rejected, &ae) || ae.Type() != lsm.RejectBusy {
		t.Fatalf("a delete while the migration's values are allocated: %+v, want rejected as busy", busy)
	}
	if v := f.validations[0]; v.EntityVersion != 2 || v.Attributes["asn"] != 64512.0 {
		t.Errorf("validation = %+v, want version 2's attributes with the allocated asn", v)
	}
	if w := f.writes[4]; w.Sets.Candidate["asn"] != 64512.0 || w.Event.MigrateTo != 2 {
		t.Errorf("the migration's write = %+v", w)
	}
}
