package workflows

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

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
	w.listenInstanceConfig(ctx)
	w.listenSync(ctx)
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
				snap, err := LoadInstanceActivity.RunLocal(quickOptions(ctx), LoadInstanceInput{
					EnvironmentID: in.EnvironmentID, Entity: in.Entity.Name, InstanceID: in.InstanceID,
				})
				if err != nil {
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
		if w.syncWanted {
			w.catchUp(ctx)
		}
		if w.modelChanged {
			// The last export was built by the old model: export again.
			w.modelChanged = false
			w.st.Export = nil
		}
		next, err := w.advance(ctx)
		w.busy = false
		if behind(err) {
			continue // catch up with PostgreSQL (write asked for it)
		}
		if err != nil {
			return err
		}
		w.publishState(ctx)
		if w.done {
			return w.finish(ctx)
		}
		if next.wait {
			if err := w.waitDeploy(ctx, next.transfer); err != nil && !behind(err) {
				return err
			}
		} else if err := workflow.Await(ctx, func() bool {
			return ((w.dirty || w.modelChanged || w.configChanged || w.syncWanted) && !w.busy) || w.shouldContinue(ctx)
		}); err != nil {
			return err
		}
		if !w.dirty && !w.modelChanged && !w.configChanged && !w.syncWanted && w.shouldContinue(ctx) {
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
	// syncWanted: SyncSignal arrived; the main loop compares the instance
	// with PostgreSQL (catchUp).
	syncWanted   bool
	createFailed bool
	transfers    int
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
			if !w.in.auto().Takes(t) {
				// The entity's or the instance's config holds this auto
				// transfer: the instance waits here for an operator's
				// set-state (setStateTransfer) or for the config to change.
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
	res, err := ExportInstanceActivity.RunLocal(longOptions(ctx), ExportInstanceInput{
		EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
		InstanceVersion: w.st.Version, Mode: mode,
		Attributes:    lsm.WithoutReadOnly(w.entityOf(lsm.EntityVersion(w.st.Sets.ActiveVersion)).Attributes, w.st.Sets.Active),
		EntityVersion: lsm.EntityVersion(w.st.Sets.ActiveVersion),
	})
	if err != nil {
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
		if w.dirty || w.modelChanged || w.syncWanted {
			return nil // the main loop looks at the new state, exports again or syncs
		}
		w.signalled = false
		if w.busy {
			if err := workflow.Await(ctx, func() bool { return !w.busy }); err != nil {
				return err
			}
			continue
		}
		w.busy = true
		res, err := CheckInstanceDeployActivity.RunLocal(quickOptions(ctx), CheckInstanceDeployInput{
			EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
			Since: w.st.Export.Result.Since,
		})
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
			return w.signalled || ((w.dirty || w.modelChanged || w.syncWanted) && !w.busy) || w.shouldContinue(ctx)
		}); err != nil {
			return err
		}
		if w.shouldContinue(ctx) && !w.dirty && !w.modelChanged && !w.syncWanted {
			return nil
		}
		delay = min(2*delay, deployPollMax)
	}
}
