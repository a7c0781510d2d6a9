package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// Entity versions (issue 14, B.5; docs/lsm.md, "Entity versions"). Each
// attribute set of an instance is of one version of its entity
// (lsm.Sets' *Version), and the versions move with the sets. A migration
// is an update whose candidate set is the instance's attributes mapped to
// a newer version (the API maps them with the model's CUE migrations): it
// takes the lifecycle's on_update transfer and its validation like any
// update, so a promote moves the instance to the new version, a failed
// validation leaves it on its own, and a rollback brings the old version
// back with the old attributes.

// MigrateUpdate is the update that moves an instance to a newer version
// of its entity.
const MigrateUpdate = "migrate"

// MigrateRequest is the migrate update.
type MigrateRequest struct {
	CurrentVersion int64
	// Entity is the target version's definition (its Version the target).
	Entity lsm.Entity
	// Attributes are the instance's attributes mapped to the target
	// version (its r attributes left out: validation computes them).
	Attributes map[string]any
	Request    *lsm.IdempotentRequest
	Actor      string
}

func (w *instanceWorkflow) registerMigrate(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, MigrateUpdate, w.migrate,
		workflow.UpdateHandlerOptions{Validator: w.validateMigrate})
}

// validateMigrate checks what an update must pass (the state takes an
// update) and that the target is newer than the version the instance's
// current set is of. The attributes' modifiers are not checked: a
// migration may set what clients may not (a renamed rw attribute); the
// target version's model validates them.
func (w *instanceWorkflow) validateMigrate(_ workflow.Context, req MigrateRequest) error {
	if _, err := w.validateRequest(req.CurrentVersion, lsm.Event{Trigger: lsm.OnUpdate}); err != nil {
		return err
	}
	if req.Entity.Name != w.in.Entity.Name {
		return temporal.NewApplicationError(fmt.Sprintf("a migration of %s names entity %q", w.in.Entity.Name, req.Entity.Name), lsm.RejectInvalid)
	}
	if cur := w.st.Sets.CurrentVersion(); lsm.EntityVersion(req.Entity.Version) <= cur {
		return temporal.NewApplicationError(fmt.Sprintf("service instance %s is of version %d of %s: a migration goes to a newer one, not %d",
			w.in.InstanceID, cur, w.in.Entity.Name, req.Entity.Version), lsm.RejectInvalid)
	}
	return nil
}

func (w *instanceWorkflow) migrate(ctx workflow.Context, req MigrateRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	if err := w.validateMigrate(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	w.addEntity(req.Entity)
	t, _ := w.lifecycle().Next(w.st.State, lsm.Event{Trigger: lsm.OnUpdate})
	sets := w.st.Sets
	sets.Candidate = lsm.WithDefaults(req.Entity.Attributes, req.Attributes)
	sets.CandidateVersion = lsm.EntityVersion(req.Entity.Version)
	if lsm.HasAllocated(req.Entity.Attributes) {
		// The target version's allocated attributes get their values
		// before the validation reads them: the ones the instance holds,
		// else new ones (a version that adds one). Entities without
		// allocated attributes run no activity here, as before. Busy
		// while it runs: no other request, and no auto transfer of the
		// main loop, moves the instance on meanwhile (request sets it
		// again, with nothing in between).
		w.busy = true
		attrs, err := AllocateValuesActivity.RunLocal(quickOptions(ctx), AllocateValuesInput{
			EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
			EntityVersion: sets.CandidateVersion, Attributes: sets.Candidate,
		})
		w.busy = false
		if err != nil {
			return ServiceInstanceRecord{}, fmt.Errorf("allocate the values of version %d: %w", sets.CandidateVersion, err)
		}
		sets.Candidate = attrs
	}
	return w.request(ctx, t, sets, caller{idem: req.Request, actor: req.Actor, migrateTo: sets.CandidateVersion})
}

// addEntity keeps e as a version the instance's sets may be of.
func (w *instanceWorkflow) addEntity(e lsm.Entity) {
	v := lsm.EntityVersion(e.Version)
	if v == lsm.EntityVersion(w.in.Entity.Version) {
		return
	}
	i := slices.IndexFunc(w.st.Entities, func(x lsm.Entity) bool { return lsm.EntityVersion(x.Version) == v })
	if i >= 0 {
		w.st.Entities[i] = e
		return
	}
	w.st.Entities = append(w.st.Entities, e)
}

// entityOf is the definition of version v of the instance's entity: the
// workflow's own, or one a migration (or the snapshot) brought.
func (w *instanceWorkflow) entityOf(v int) lsm.Entity {
	v = lsm.EntityVersion(v)
	if v == lsm.EntityVersion(w.in.Entity.Version) {
		return w.in.Entity
	}
	for _, e := range w.st.Entities {
		if lsm.EntityVersion(e.Version) == v {
			return e
		}
	}
	return w.in.Entity // not known: the workflow's own, as before versions
}
