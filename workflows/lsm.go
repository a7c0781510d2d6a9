package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/names"
)

// Names of the lifecycle engine (docs/architecture.md, "The lifecycle
// service manager"), registered explicitly as the others in contract.go.
const (
	ServiceInstanceWorkflowName = "intend.ServiceInstance"

	ApplyTransferActivity       = "intend.ApplyTransfer"
	ValidateInstanceActivity    = "intend.ValidateInstance"
	ExportInstanceActivity      = "intend.ExportInstance"
	CheckInstanceDeployActivity = "intend.CheckInstanceDeploy"
	LoadInstanceActivity        = "intend.LoadInstance"

	// The updates of an instance's workflow. CreateUpdate is the first,
	// sent with update-with-start.
	CreateUpdate   = "create"
	UpdateUpdate   = "update"
	SetStateUpdate = "set_state"
	DeleteUpdate   = "delete"

	// DeployedSignal tells an instance's workflow that a deploy run ended
	// that may have deployed its resources: it checks at once instead of
	// at its next poll (no payload).
	DeployedSignal = "intend.lsm.deployed"
	// ModelChangedSignal tells an instance's workflow that the
	// environment has a new model source: a state that exports the
	// instance's resources exports them again, built by the new model
	// (payload: the model source's hash).
	ModelChangedSignal = "intend.lsm.model_changed"
)

// Search attributes of an instance's workflow, besides
// SearchAttrEnvironment (see temporal.yaml).
const (
	SearchAttrServiceEntity   = "IntendServiceEntity"
	SearchAttrServiceInstance = "IntendServiceInstance"
)

// Export modes of ExportInstance.
const (
	// ExportResources exports the instance's resources built from its
	// active set.
	ExportResources = "export"
	// ExportPurged exports them purged (their removal).
	ExportPurged = "purge"
	// ExportRemove removes the instance's set from the model.
	ExportRemove = "remove"
)

// Outcomes of CheckInstanceDeploy.
const (
	DeployDone    = "done"
	DeployFailed  = "failed"
	DeployPending = "pending"
)

// Defaults of the instance workflow.
const (
	// defaultMaxTransfers is how many transfers a run applies before it
	// continues as new (each costs a handful of events).
	defaultMaxTransfers = 200
	// deployPollFirst and deployPollMax bound the deploy wait's polls.
	// The polls are the fallback: the deploy run's end signals the
	// instances it deployed (DeployedSignal), so on a running server the
	// first poll, 5 s after the export, rarely fires; every poll that
	// fires is a workflow task of its own. Runs recorded before
	// timerCancelVersion polled first after 1 s.
	deployPollFirst   = 5 * time.Second
	deployPollFirstV0 = time.Second
	deployPollMax     = 30 * time.Second
	// createWait is how long a workflow started without its create
	// update waits for it before ending.
	createWait = 10 * time.Minute
	// lostCreateWait is how long a fresh workflow waits for its create
	// update before it looks for the instance in PostgreSQL.
	lostCreateWait = 20 * time.Second
)

// ServiceInstanceWorkflowID is the id of a service instance's workflow.
func ServiceInstanceWorkflowID(env, entity, id string) string {
	return names.ServiceInstanceWorkflowID(env, entity, id)
}

// ServiceInstanceSearchAttributes are the search attributes of an
// instance's workflow at its start; state is the instance's state when
// known ("": a create, whose workflow sets it once the create is
// applied).
func ServiceInstanceSearchAttributes(env, entity, id, state string) temporal.SearchAttributes {
	updates := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(SearchAttrEnvironment).ValueSet(env),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrServiceEntity).ValueSet(entity),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrServiceInstance).ValueSet(id),
	}
	if state != "" {
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(SearchAttrInstanceState).ValueSet(state))
	}
	return temporal.NewSearchAttributes(updates...)
}

// RegisterServiceInstance registers the instance workflow and the model
// change notification under their names.
func RegisterServiceInstance(w interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}) {
	w.RegisterWorkflowWithOptions(ServiceInstance, workflow.RegisterOptions{Name: ServiceInstanceWorkflowName})
	w.RegisterWorkflowWithOptions(ModelChanged, workflow.RegisterOptions{Name: ModelChangedWorkflowName})
}

// ServiceInstanceInput starts (or continues) an instance's workflow. It
// carries what the update validators need to judge a request without
// I/O: the entity's attributes, lifecycle and identity.
type ServiceInstanceInput struct {
	EnvironmentID   string
	EnvironmentName string
	Entity          lsm.Entity
	InstanceID      string
	// MaxTransfers is how many transfers a run applies before it
	// continues as new (0: 200).
	MaxTransfers int
	// Snapshot is the instance as the previous run left it; nil on a
	// fresh start, which waits for the create update.
	Snapshot *InstanceSnapshot
	// AutoTransfersOff: the entity's config turned its auto transfers
	// off (lsm_config.go); ConfigChangedSignal changes it.
	AutoTransfersOff bool `json:",omitempty"`
	// Generation is the workflow's behaviour its run was started with
	// (InstanceGeneration when started by this code). Recorded in the
	// input, it lets a replay of an older run keep the older behaviour
	// without a GetVersion marker: each GetVersion is an event and an
	// upsert of the TemporalChangeVersion search attribute, a write of
	// the Temporal server's visibility store, per run. 0: decided by the
	// load-lost-create and cancel-await-timers changes; 1: a fresh run
	// looks for a lost create, and waits cancel their timers; 2: and
	// the run keeps IntendInstanceState up to date (lsm_details.go).
	Generation int `json:",omitempty"`
}

// InstanceGeneration is the Generation of the instance workflows this
// code starts; a continued run keeps its run's.
const InstanceGeneration = 2

// InstanceSnapshot is an instance's state as the workflow holds it.
type InstanceSnapshot struct {
	State    string
	Version  int64
	Identity string
	Sets     lsm.Sets
	// Export is the last export made for the instance, if any.
	Export *InstanceExport
	// Entities are the versions of the entity the instance's sets are
	// of besides ServiceInstanceInput.Entity's (a migration brings its
	// target's: lsm_versions.go).
	Entities []lsm.Entity `json:",omitempty"`
}

// InstanceExport records an export of the instance's set: what it was
// made for and where to look for its deploy.
type InstanceExport struct {
	// InstanceVersion is the instance version it was made for; Mode is
	// ExportResources, ExportPurged or ExportRemove; Attributes the
	// active set it was built from.
	InstanceVersion int64
	Mode            string
	Attributes      map[string]any
	// Result is ExportInstance's.
	Result ExportInstanceResult
}

// CreateRequest is the create update: the client's attributes.
type CreateRequest struct {
	Attributes map[string]any
	Request    *lsm.IdempotentRequest
	// Actor is who asked (auth.Principal.Actor), for the instance's log.
	Actor string
}

// UpdateRequest is the update update: the whole new candidate set (the
// API applies the client's edits to the current one first).
type UpdateRequest struct {
	CurrentVersion int64
	Attributes     map[string]any
	Request        *lsm.IdempotentRequest
	Actor          string
}

// SetStateRequest is the set_state update: an api transfer to Target.
type SetStateRequest struct {
	CurrentVersion int64
	Target         string
	Request        *lsm.IdempotentRequest
	Actor          string
}

// DeleteRequest is the delete update: the on_delete transfer.
type DeleteRequest struct {
	CurrentVersion int64
	Request        *lsm.IdempotentRequest
	Actor          string
}

// IllegalDetails are the details of an lsm.RejectIllegal rejection.
type IllegalDetails struct {
	State   string      `json:"state"`
	Allowed []lsm.Event `json:"allowed"`
}

// ServiceInstanceRecord is an instance as written, what every update
// returns.
type ServiceInstanceRecord = lsm.Instance

// TransferEvent is what caused a version, as the instance's log keeps it.
type TransferEvent struct {
	// Trigger is create or a lifecycle trigger.
	Trigger    string          `json:"trigger"`
	Source     string          `json:"source,omitempty"`
	Target     string          `json:"target"`
	Error      bool            `json:"error"`
	Operations []lsm.Operation `json:"operations"`
	// Request is the Idempotency-Key of the request behind it, if any.
	Request string `json:"request,omitempty"`
	// Actor is who asked for it (token:NAME, oidc:SUBJECT); absent for
	// intend's own transfers (auto and resource triggers).
	Actor string `json:"actor,omitempty"`
	// Reason is why an expert forced the transfer (trigger expert).
	Reason string `json:"reason,omitempty"`
	// MigrateTo is the entity version a migration asked for (its
	// on_update transfer).
	MigrateTo int `json:"migrate_to,omitempty"`
}

// caller is what the engine knows of a request's sender: its
// Idempotency-Key (nil: none) and who it is.
type caller struct {
	idem  *lsm.IdempotentRequest
	actor string
	// migrateTo is the entity version a migration's update moves to.
	migrateTo int
}

// ApplyTransferInput writes one version of an instance.
type ApplyTransferInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	// Version is the version written: the current one plus one (1 for the
	// create).
	Version  int64
	Identity string
	State    string
	Sets     lsm.Sets
	Deleted  bool
	Event    TransferEvent
	// Errors are a failed validation's or export's errors, for the log.
	Errors  json.RawMessage
	Request *lsm.IdempotentRequest
}

// ValidateInstanceInput asks whether the model compiles with the
// instance's candidate attributes among the other live instances.
type ValidateInstanceInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	Attributes    map[string]any
	// EntityVersion is the entity version Attributes are of (0: the
	// entity's latest, as before versions).
	EntityVersion int `json:",omitempty"`
}

// ValidateInstanceResult is the validation's outcome; Errors are the
// compile's errors (all of them, for the log) when it failed. ReadOnly
// are the values the model computed for the entity's r attributes, when
// it succeeded.
type ValidateInstanceResult struct {
	OK       bool
	Errors   json.RawMessage
	ReadOnly map[string]any
}

// ExportInstanceInput asks for a partial export of the instance's set.
type ExportInstanceInput struct {
	EnvironmentID   string
	Entity          string
	InstanceID      string
	InstanceVersion int64
	Mode            string
	// Attributes are the active set the resources are built from
	// (ExportResources, ExportPurged).
	Attributes map[string]any
	// EntityVersion is the entity version Attributes are of (0: the
	// entity's latest, as before versions).
	EntityVersion int `json:",omitempty"`
}

// ExportInstanceResult is the export: the desired-state version holding
// the set's content (Changed: the activity exported it; otherwise the set
// held it already), released by the activity.
type ExportInstanceResult struct {
	Version   int64
	Changed   bool
	Resources int
	// Since is the database's time when the export was made: a failure
	// recorded before it is not this export's.
	Since time.Time
	// Failed: the resources could not be built or exported (model errors,
	// refused by the merge); Errors say why.
	Failed bool
	Errors json.RawMessage
}

// LoadInstanceInput asks for an instance as PostgreSQL holds it.
type LoadInstanceInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
}

// CheckInstanceDeployInput asks how the deploy of an instance's set goes.
type CheckInstanceDeployInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	Since         time.Time
}

// CheckInstanceDeployResult is DeployDone (every resource of the set is
// deployed as intended), DeployFailed (one failed since the export) or
// DeployPending.
type CheckInstanceDeployResult struct {
	Status   string
	Total    int
	Deployed int
	Failed   int
}

// ServiceInstance is the workflow of one service instance
// (lsm/<env>/<entity>/<id>): it holds the instance's state and version,
// judges requests (updates) against its lifecycle, writes every transfer
// with ApplyTransfer and, after each, runs what the new state calls for:
// its auto transfer (validating first when it says so), the export of
// its resources and the wait for their deploy (resource transfers). A
// terminal state removes the instance's set and ends the workflow.
//
// Requests are served one at a time: while a transfer and the work after
// it are under way, updates are rejected with lsm.RejectBusy rather than
// queued, because a queued request's current_version would be judged
// against a version the client never saw. Waiting for a deploy is not
// busy: a request may move the instance on meanwhile, and the wait is
// dropped.
func ServiceInstance(ctx workflow.Context, in ServiceInstanceInput) error {
	w := &instanceWorkflow{in: in}
	if in.Snapshot != nil {
		w.st = *in.Snapshot
	}
	switch {
	case in.Generation >= 1:
		w.cancelTimers = true
	case w.st.Version > 0:
		// A continued run of generation 0. A fresh one learns it from
		// load-lost-create's version 2 below.
		w.cancelTimers = workflow.GetVersion(ctx, timerCancelChange, workflow.DefaultVersion, 1) == 1
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	deployed := workflow.GetSignalChannel(ctx, DeployedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			deployed.Receive(ctx, nil)
			w.signalled = true
		}
	})
	modelChanged := workflow.GetSignalChannel(ctx, ModelChangedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var hash string
			modelChanged.Receive(ctx, &hash)
			w.modelChanged = true
		}
	})
	w.listenConfig(ctx)
	if w.st.Version == 0 {
		wait := createWait
		lostCreate := in.Generation >= 1
		if !lostCreate {
			v := workflow.GetVersion(ctx, "load-lost-create", workflow.DefaultVersion, 2)
			w.cancelTimers = v >= 2
			lostCreate = v >= 1
		}
		if lostCreate {
			// The create update came with the start; if it is not here
			// soon, it was lost with a workflow task the Temporal server
			// did not keep (an outage), after its transfers were
			// written: PostgreSQL then holds the instance, and the
			// workflow takes it up from there.
			ok, err := w.awaitWithTimeout(ctx, lostCreateWait, func() bool { return w.st.Version > 0 || w.createFailed })
			if err != nil {
				return err
			}
			if !ok {
				var snap *InstanceSnapshot
				if err := workflow.ExecuteLocalActivity(quickOptions(ctx), LoadInstanceActivity, LoadInstanceInput{
					EnvironmentID: in.EnvironmentID, Entity: in.Entity.Name, InstanceID: in.InstanceID,
				}).Get(ctx, &snap); err != nil {
					return err
				}
				if snap != nil && w.st.Version == 0 {
					workflow.GetLogger(ctx).Warn("the create update was lost; the instance is taken up from PostgreSQL",
						"state", snap.State, "version", snap.Version)
					w.st = *snap
				}
			}
			wait -= lostCreateWait
		}
		ok, err := w.awaitWithTimeout(ctx, wait, func() bool { return w.st.Version > 0 || w.createFailed })
		if err != nil {
			return err
		}
		if !ok || w.st.Version == 0 {
			workflow.GetLogger(ctx).Warn("no instance was created; the workflow ends")
			return w.finish(ctx)
		}
	}
	w.showDetails(ctx)
	for {
		if err := w.acquire(ctx); err != nil {
			return err
		}
		w.dirty, w.configChanged = false, false
		if w.modelChanged {
			// The last export was built by the old model: export again.
			w.modelChanged = false
			w.st.Export = nil
		}
		next, err := w.advance(ctx)
		w.busy = false
		if err != nil {
			return err
		}
		w.publishState(ctx)
		if w.done {
			return w.finish(ctx)
		}
		if next.wait {
			if err := w.waitDeploy(ctx, next.transfer); err != nil {
				return err
			}
		} else if err := workflow.Await(ctx, func() bool {
			return ((w.dirty || w.modelChanged || w.configChanged) && !w.busy) || w.shouldContinue(ctx)
		}); err != nil {
			return err
		}
		if !w.dirty && !w.modelChanged && !w.configChanged && w.shouldContinue(ctx) {
			return w.continueAsNew(ctx)
		}
	}
}

type instanceWorkflow struct {
	in ServiceInstanceInput
	st InstanceSnapshot
	// busy: a request's handler or the main loop is applying a transfer.
	busy bool
	// dirty: a request applied a transfer the main loop has not looked at.
	dirty bool
	// signalled: DeployedSignal arrived since the last deploy check.
	signalled bool
	// modelChanged: ModelChangedSignal arrived; the main loop exports
	// again.
	modelChanged bool
	// configChanged: ConfigChangedSignal arrived; the main loop looks at
	// the state again (auto transfers turned back on take it on).
	configChanged bool
	createFailed  bool
	transfers     int
	// lastError is what last went wrong, for the current details.
	lastError string
	done      bool
	// cancelTimers: the run cancels the timer of a wait whose condition
	// came first (awaitWithTimeout); false when replaying a history
	// recorded before.
	cancelTimers bool
}

// timerCancelChange is the workflow.GetVersion change id of
// awaitWithTimeout's timer cancellation (and of the 5 s first deploy
// poll) in a continued run; a fresh run has it from version 2 of
// load-lost-create. Histories recorded before replay with the SDK's own
// wait.
const timerCancelChange = "cancel-await-timers"

// awaitWithTimeout is workflow.AwaitWithTimeout, but cancels its timer
// when the condition comes first. The SDK's leaves the timer running (its
// flag to cancel it is off in SDK 1.50): every create left a 20 s and a
// 9m40s timer and every deploy wait its poll timer behind, each firing
// later as a workflow task that did nothing, up to three per instance, the
// Temporal server's work that bounded P7 (docs/benchmarks.md). A timer
// cancelled in the workflow task that started it costs no event at all;
// later, one TimerCanceled event in a task the workflow runs anyway.
func (w *instanceWorkflow) awaitWithTimeout(ctx workflow.Context, d time.Duration, cond func() bool) (bool, error) {
	if !w.cancelTimers {
		return workflow.AwaitWithTimeout(ctx, d, cond)
	}
	if cond() {
		return true, nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, d)
	if err := workflow.Await(ctx, func() bool { return cond() || timer.IsReady() }); err != nil {
		return false, err
	}
	return cond(), nil
}

func (w *instanceWorkflow) lifecycle() *lsm.Lifecycle { return &w.in.Entity.Lifecycle }

func (w *instanceWorkflow) maxTransfers() int {
	if w.in.MaxTransfers > 0 {
		return w.in.MaxTransfers
	}
	return defaultMaxTransfers
}

// acquire waits until nobody applies a transfer and takes the turn.
func (w *instanceWorkflow) acquire(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return !w.busy }); err != nil {
		return err
	}
	w.busy = true
	return nil
}

func (w *instanceWorkflow) shouldContinue(ctx workflow.Context) bool {
	return !w.busy && (w.transfers >= w.maxTransfers() || workflow.GetInfo(ctx).GetContinueAsNewSuggested())
}

// continueAsNew drains the handlers and continues with the snapshot.
func (w *instanceWorkflow) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	in := w.in
	snap := w.st
	in.Snapshot = &snap
	return workflow.NewContinueAsNewError(ctx, ServiceInstanceWorkflowName, in)
}

func (w *instanceWorkflow) finish(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// The lifecycle engine's activities run as local activities: in the
// workflow's worker, recorded as one marker each in the workflow task that
// ran them, with no activity task through the Temporal server. An
// instance's create → up is then three workflow tasks instead of ten, which
// is what lets 1,000 instances through a single-node Temporal at once
// (docs/benchmarks.md, P7). Every activity is idempotent (ApplyTransfer by
// version, ExportInstance by content, the others read), so a workflow task
// lost with the worker runs them again harmlessly. Both kinds retry until
// they succeed (an instance has nowhere else to go) or fail with a
// non-retryable error; a compile is bounded by the activity's own compile
// time limit, and a long one keeps the workflow task alive by the SDK's
// workflow task heartbeat.
func quickOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
}

func longOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 15 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
}

// register sets the update handlers.
func (w *instanceWorkflow) register(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, CreateUpdate, w.create,
		workflow.UpdateHandlerOptions{Validator: w.validateCreate}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateUpdate, w.update,
		workflow.UpdateHandlerOptions{Validator: w.validateUpdate}); err != nil {
		return err
	}
	if err := w.registerExpert(ctx); err != nil {
		return err
	}
	if err := w.registerMigrate(ctx); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, SetStateUpdate, w.setState,
		workflow.UpdateHandlerOptions{Validator: w.validateSetState}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, DeleteUpdate, w.delete,
		workflow.UpdateHandlerOptions{Validator: w.validateDelete})
}

func (w *instanceWorkflow) validateCreate(_ workflow.Context, req CreateRequest) error {
	if w.st.Version > 0 || w.busy {
		return temporal.NewApplicationError(fmt.Sprintf("service instance %s exists", w.in.InstanceID), lsm.RejectExists)
	}
	return invalid(lsm.CheckCreate(w.in.Entity.Attributes, req.Attributes))
}

// validateRequest checks what every request after the create must pass:
// the instance exists, nobody is applying a transfer, the version is
// current, and the state has a transfer for ev.
func (w *instanceWorkflow) validateRequest(version int64, ev lsm.Event) (lsm.Transfer, error) {
	if w.st.Version == 0 {
		return lsm.Transfer{}, temporal.NewApplicationError(
			fmt.Sprintf("service instance %s is not created yet", w.in.InstanceID), lsm.RejectNotCreated)
	}
	if w.busy {
		return lsm.Transfer{}, temporal.NewApplicationError(fmt.Sprintf(
			"service instance %s is applying a transfer (state %s, version %d); try again shortly",
			w.in.InstanceID, w.st.State, w.st.Version), lsm.RejectBusy)
	}
	if version != w.st.Version {
		return lsm.Transfer{}, temporal.NewApplicationError(fmt.Sprintf(
			"service instance %s is at version %d, not %d", w.in.InstanceID, w.st.Version, version),
			lsm.RejectStale, w.st.Version)
	}
	t, err := w.lifecycle().Next(w.st.State, ev)
	if err != nil {
		return t, temporal.NewApplicationError(err.Error(), lsm.RejectIllegal,
			IllegalDetails{State: w.st.State, Allowed: w.allowed()})
	}
	return t, nil
}

func (w *instanceWorkflow) validateUpdate(_ workflow.Context, req UpdateRequest) error {
	if _, err := w.validateRequest(req.CurrentVersion, lsm.Event{Trigger: lsm.OnUpdate}); err != nil {
		return err
	}
	return invalid(lsm.CheckUpdate(w.entityOf(w.currentVersion()).Attributes, w.currentAttributes(), req.Attributes))
}

func (w *instanceWorkflow) validateSetState(_ workflow.Context, req SetStateRequest) error {
	_, err := w.setStateTransfer(req)
	return err
}

func (w *instanceWorkflow) validateDelete(_ workflow.Context, req DeleteRequest) error {
	_, err := w.validateRequest(req.CurrentVersion, lsm.Event{Trigger: lsm.OnDelete})
	return err
}

// currentAttributes is what an update edits: the candidate set, or the
// active one when there is no candidate.
func (w *instanceWorkflow) currentAttributes() map[string]any {
	if w.st.Sets.Candidate != nil {
		return w.st.Sets.Candidate
	}
	return w.st.Sets.Active
}

// invalid makes an *lsm.AttributeError an lsm.RejectInvalid rejection.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	var ae *lsm.AttributeError
	if errors.As(err, &ae) {
		return temporal.NewApplicationError(ae.Error(), lsm.RejectInvalid, ae.Problems)
	}
	return temporal.NewApplicationError(err.Error(), lsm.RejectInvalid)
}

// The handlers run the validator's checks again: on replay validators do
// not run, and an update the validator accepted must behave the same.

func (w *instanceWorkflow) create(ctx workflow.Context, req CreateRequest) (ServiceInstanceRecord, error) {
	if err := w.validateCreate(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	w.busy = true
	defer func() { w.busy = false }()
	start := w.lifecycle().Start
	ev := TransferEvent{Trigger: "create", Target: start, Operations: []lsm.Operation{}, Actor: req.Actor}
	if req.Request != nil {
		ev.Request = req.Request.Key
	}
	// The candidate set shows the defaults the model would use.
	attrs := lsm.WithDefaults(w.in.Entity.Attributes, req.Attributes)
	rec, err := w.write(ctx, ApplyTransferInput{
		Version:  1,
		Identity: identity(w.in.Entity.Identity, attrs),
		State:    start,
		Sets:     lsm.Sets{Candidate: attrs, CandidateVersion: w.in.Entity.Version},
		Deleted:  w.lifecycle().States[start].Terminal,
		Event:    ev,
		Request:  req.Request,
	})
	if err != nil {
		w.createFailed = true
		return rec, err
	}
	w.dirty = true
	return rec, nil
}

func (w *instanceWorkflow) update(ctx workflow.Context, req UpdateRequest) (ServiceInstanceRecord, error) {
	if err := w.validateUpdate(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	t, _ := w.lifecycle().Next(w.st.State, lsm.Event{Trigger: lsm.OnUpdate})
	sets := w.st.Sets
	sets.Candidate, sets.CandidateVersion = req.Attributes, w.currentVersion()
	return w.request(ctx, t, sets, caller{idem: req.Request, actor: req.Actor})
}

func (w *instanceWorkflow) setState(ctx workflow.Context, req SetStateRequest) (ServiceInstanceRecord, error) {
	if err := w.validateSetState(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	t, _ := w.setStateTransfer(req)
	return w.request(ctx, t, w.st.Sets, caller{idem: req.Request, actor: req.Actor})
}

func (w *instanceWorkflow) delete(ctx workflow.Context, req DeleteRequest) (ServiceInstanceRecord, error) {
	if err := w.validateDelete(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	t, _ := w.lifecycle().Next(w.st.State, lsm.Event{Trigger: lsm.OnDelete})
	return w.request(ctx, t, w.st.Sets, caller{idem: req.Request, actor: req.Actor})
}

// request applies the transfer a request caused, validating first when
// the transfer says so (an api transfer may).
func (w *instanceWorkflow) request(ctx workflow.Context, t lsm.Transfer, sets lsm.Sets, req caller) (ServiceInstanceRecord, error) {
	w.busy = true
	defer func() { w.busy = false }()
	failed, errs := false, json.RawMessage(nil)
	if t.Validate {
		var err error
		if failed, errs, sets, err = w.validate(ctx, sets); err != nil {
			return ServiceInstanceRecord{}, err
		}
	}
	rec, err := w.transfer(ctx, t, sets, failed, errs, req)
	if err == nil {
		w.dirty = true
	}
	return rec, err
}

// validationSet is what a validating transfer validates: the candidate
// set, or the active one when there is no candidate (a lifecycle may
// validate an api transfer out of an active state).
func validationSet(sets lsm.Sets) map[string]any {
	if sets.Candidate != nil {
		return sets.Candidate
	}
	return sets.Active
}

// validate runs ValidateInstance with the set validationSet picks, and
// returns sets with the r attribute values the model computed written
// into that set (when the validation succeeded).
func (w *instanceWorkflow) validate(ctx workflow.Context, sets lsm.Sets) (failed bool, errs json.RawMessage, out lsm.Sets, err error) {
	var res ValidateInstanceResult
	version := validationVersion(sets)
	if err := workflow.ExecuteLocalActivity(longOptions(ctx), ValidateInstanceActivity, ValidateInstanceInput{
		EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
		Attributes: lsm.WithoutReadOnly(w.entityOf(version).Attributes, validationSet(sets)), EntityVersion: version,
	}).Get(ctx, &res); err != nil {
		return false, nil, sets, fmt.Errorf("validate: %w", err)
	}
	if res.OK && len(res.ReadOnly) > 0 {
		if sets.Candidate != nil {
			sets.Candidate = withValues(sets.Candidate, res.ReadOnly)
		} else if sets.Active != nil {
			sets.Active = withValues(sets.Active, res.ReadOnly)
		}
	}
	return !res.OK, res.Errors, sets, nil
}

// withValues is attrs (not changed) with vals written over it.
func withValues(attrs, vals map[string]any) map[string]any {
	out := maps.Clone(attrs)
	maps.Copy(out, vals)
	return out
}

// transfer writes t (to its error state when failed) from sets: the
// transfer's operations are applied to them.
func (w *instanceWorkflow) transfer(ctx workflow.Context, t lsm.Transfer, sets lsm.Sets, failed bool, errs json.RawMessage, req caller) (ServiceInstanceRecord, error) {
	target, ops := t.Target, t.TargetOperation
	if failed {
		target, ops = t.Error, t.ErrorOperation
	}
	if ops == nil {
		ops = []lsm.Operation{}
	}
	ev := TransferEvent{Trigger: string(t.Trigger), Source: t.Source, Target: target, Error: failed, Operations: ops,
		Actor: req.actor, MigrateTo: req.migrateTo}
	if req.idem != nil {
		ev.Request = req.idem.Key
	}
	return w.write(ctx, ApplyTransferInput{
		Version:  w.st.Version + 1,
		Identity: w.st.Identity,
		State:    target,
		Sets:     lsm.ApplyAll(ops, sets),
		Deleted:  w.lifecycle().States[target].Terminal,
		Event:    ev,
		Errors:   errs,
		Request:  req.idem,
	})
}

// write runs ApplyTransfer and takes what it wrote as the instance's state.
func (w *instanceWorkflow) write(ctx workflow.Context, in ApplyTransferInput) (ServiceInstanceRecord, error) {
	in.EnvironmentID, in.Entity, in.InstanceID = w.in.EnvironmentID, w.in.Entity.Name, w.in.InstanceID
	var rec ServiceInstanceRecord
	if err := workflow.ExecuteLocalActivity(quickOptions(ctx), ApplyTransferActivity, in).Get(ctx, &rec); err != nil {
		return rec, fmt.Errorf("apply transfer to %s (version %d): %w", in.State, in.Version, err)
	}
	w.st.State, w.st.Version, w.st.Identity, w.st.Sets = in.State, in.Version, in.Identity, in.Sets
	w.transfers++
	workflow.GetLogger(ctx).Info("service instance transfer", "state", in.State, "version", in.Version,
		"trigger", in.Event.Trigger, "error", in.Event.Error)
	if in.Event.Error {
		w.noteError(fmt.Sprintf("transfer %s went to its error state %s", in.Event.Trigger, in.State), in.Errors)
	}
	w.showDetails(ctx)
	return rec, nil
}

// step is what the state waits for after advance.
type step struct {
	// wait: the deploy of the export, then transfer (resource-triggered).
	wait     bool
	transfer lsm.Transfer
}

// advance runs what the current state calls for until it waits for
// something from outside: auto transfers (validated when they say so),
// the export of the instance's set, and, for a terminal state, the
// removal of the set. A state left by an auto transfer is not exported:
// the state it leads to exports what it needs.
func (w *instanceWorkflow) advance(ctx workflow.Context) (step, error) {
	lc := w.lifecycle()
	for {
		state, ok := lc.States[w.st.State]
		if !ok {
			return step{}, fmt.Errorf("lifecycle %s has no state %q", lc.Name, w.st.State)
		}
		if state.Terminal {
			if _, err := w.export(ctx, ExportRemove, false); err != nil {
				return step{}, err
			}
			w.done = true
			return step{}, nil
		}
		if t, ok := lc.AutoFrom(w.st.State); ok {
			if w.in.AutoTransfersOff {
				// The entity's auto transfers are off: the instance waits
				// here for an operator's set-state (setStateTransfer).
				return step{}, nil
			}
			failed, errs, sets := false, json.RawMessage(nil), w.st.Sets
			if t.Validate {
				var err error
				if failed, errs, sets, err = w.validate(ctx, sets); err != nil {
					return step{}, err
				}
			}
			if _, err := w.transfer(ctx, t, sets, failed, errs, caller{}); err != nil {
				return step{}, err
			}
			continue
		}
		if !state.Export && !state.Purge {
			return step{}, nil
		}
		mode := ExportResources
		if state.Purge {
			mode = ExportPurged
		}
		rt, noResource := lc.Next(w.st.State, lsm.Event{Trigger: lsm.Resource})
		waits := noResource == nil
		res, err := w.export(ctx, mode, waits)
		if err != nil {
			return step{}, err
		}
		switch {
		case res.Failed && waits:
			// The deploy cannot happen: the transfer goes to its error.
			if _, err := w.transfer(ctx, rt, w.st.Sets, true, res.Errors, caller{}); err != nil {
				return step{}, err
			}
			continue
		case res.Failed:
			workflow.GetLogger(ctx).Warn("the instance's resources could not be exported", "state", w.st.State,
				"version", w.st.Version, "error", string(res.Errors))
			w.noteError("the export of its resources failed", res.Errors)
			w.showDetails(ctx)
		case waits:
			return step{wait: true, transfer: rt}, nil
		}
		return step{}, nil
	}
}

// export makes the export mode asks for and returns it. The last export
// stands when it was made for this version, or, for a state that does not
// wait for a deploy, in the same mode from the same active set (the set's
// content cannot differ). A state that waits always exports again (the
// activity exports nothing when the content is the same, but queues a
// deploy of what is not deployed), so its wait starts from a fresh time.
func (w *instanceWorkflow) export(ctx workflow.Context, mode string, waits bool) (ExportInstanceResult, error) {
	if e := w.st.Export; e != nil && e.Mode == mode {
		same := e.InstanceVersion == w.st.Version || mode == ExportRemove ||
			(!waits && !e.Result.Failed && reflect.DeepEqual(e.Attributes, w.st.Sets.Active))
		if same {
			return e.Result, nil
		}
	}
	var res ExportInstanceResult
	if err := workflow.ExecuteLocalActivity(longOptions(ctx), ExportInstanceActivity, ExportInstanceInput{
		EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
		InstanceVersion: w.st.Version, Mode: mode,
		Attributes:    lsm.WithoutReadOnly(w.entityOf(lsm.EntityVersion(w.st.Sets.ActiveVersion)).Attributes, w.st.Sets.Active),
		EntityVersion: lsm.EntityVersion(w.st.Sets.ActiveVersion),
	}).Get(ctx, &res); err != nil {
		return res, fmt.Errorf("export: %w", err)
	}
	w.st.Export = &InstanceExport{InstanceVersion: w.st.Version, Mode: mode, Attributes: w.st.Sets.Active, Result: res}
	return res, nil
}

// waitDeploy waits for the deploy of the last export, checking with
// CheckInstanceDeploy on a durable timer (1 s doubling to 30 s) and at
// once on DeployedSignal, then applies t to its target or, when the
// deploy failed, to its error state. A request that moves the instance
// meanwhile ends the wait (the main loop looks at the new state); so does
// a due continue-as-new, whose next run waits again from the snapshot.
func (w *instanceWorkflow) waitDeploy(ctx workflow.Context, t lsm.Transfer) error {
	delay := deployPollFirst
	if !w.cancelTimers {
		delay = deployPollFirstV0
	}
	for {
		if w.dirty || w.modelChanged {
			return nil // the main loop looks at the new state, or exports again
		}
		w.signalled = false
		if w.busy {
			if err := workflow.Await(ctx, func() bool { return !w.busy }); err != nil {
				return err
			}
			continue
		}
		w.busy = true
		var res CheckInstanceDeployResult
		err := workflow.ExecuteLocalActivity(quickOptions(ctx), CheckInstanceDeployActivity, CheckInstanceDeployInput{
			EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
			Since: w.st.Export.Result.Since,
		}).Get(ctx, &res)
		if err == nil && res.Status != DeployPending {
			_, err = w.transfer(ctx, t, w.st.Sets, res.Status == DeployFailed, nil, caller{})
			w.busy = false
			if err == nil {
				w.dirty = true // the main loop looks at the new state
			}
			return err
		}
		w.busy = false
		if err != nil {
			return fmt.Errorf("check the deploy: %w", err)
		}
		if w.shouldContinue(ctx) {
			return nil
		}
		if _, err := w.awaitWithTimeout(ctx, delay, func() bool {
			return w.signalled || ((w.dirty || w.modelChanged) && !w.busy) || w.shouldContinue(ctx)
		}); err != nil {
			return err
		}
		if w.shouldContinue(ctx) && !w.dirty && !w.modelChanged {
			return nil
		}
		delay = min(2*delay, deployPollMax)
	}
}

// identity is the value of the entity's identity attribute in attrs, as
// the store keeps it (lsm.Identity). The identity is fixed at the create
// (an identity attribute is rw).
func identity(attr string, attrs map[string]any) string { return lsm.Identity(attr, attrs) }
