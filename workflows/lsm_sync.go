package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// SyncSignal asks an instance's workflow to compare what it holds with
// PostgreSQL and take up what it lost (no payload). The lifecycle
// engine's activities run as local activities, so a transfer is written
// to PostgreSQL inside the workflow task that runs it. When that task is
// lost with its worker and its update with it (Temporal keeps an update
// only once a completed task accepted it), PostgreSQL holds versions the
// workflow's history never had: the instance shows a state the workflow
// does not know it is in, and nothing moves it on. Whoever meets that
// sends this signal: the engine, when a request carries a version newer
// than the workflow's (the client read it from PostgreSQL); an order
// item, when it finds the response to its own request stored but
// retries; and the reconciler, when an instance's state in PostgreSQL
// has differed from its workflow's for a while. A signal when nothing
// was lost costs one read.
const SyncSignal = "intend.lsm.sync"

// listenSync notes SyncSignal for the main loop.
func (w *instanceWorkflow) listenSync(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, SyncSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			ch.Receive(ctx, nil)
			w.syncWanted = true
		}
	})
}

// catchUp reads the instance from PostgreSQL and, when PostgreSQL holds a
// newer version than the workflow, takes the instance up from there (as
// a workflow started again by the reconciler would): its state, version
// and sets, with the last export dropped, so that the main loop runs
// what that state calls for (an export and the wait for its deploy, an
// auto transfer). The main loop calls it holding the turn. A failed read
// is logged and changes nothing: the next signal tries again.
func (w *instanceWorkflow) catchUp(ctx workflow.Context) bool {
	w.syncWanted = false
	snap, err := LoadInstanceActivity.RunLocal(quickOptions(ctx), LoadInstanceInput{
		EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
	})
	if err != nil {
		workflow.GetLogger(ctx).Warn("sync: the instance could not be read", "error", err)
		return false
	}
	if snap == nil || snap.Version <= w.st.Version {
		return false
	}
	workflow.GetLogger(ctx).Warn("the workflow was behind PostgreSQL (a workflow task was lost after its transfers were written); "+
		"the instance is taken up from there", "version", w.st.Version, "state", w.st.State,
		"postgres_version", snap.Version, "postgres_state", snap.State)
	w.st.State, w.st.Version, w.st.Identity, w.st.Sets = snap.State, snap.Version, snap.Identity, snap.Sets
	for _, e := range snap.Entities {
		w.addEntity(e)
	}
	w.st.Export = nil
	w.showDetails(ctx)
	return true
}

// behind reports whether err is ApplyTransfer's stale rejection: the
// version the workflow wrote was written before by another transfer, so
// PostgreSQL is ahead of the workflow. write then asks the main loop to
// catch up; a request's handler returns the rejection to its client (the
// instance's version in it), and the main loop catches up rather than
// fail the workflow.
func behind(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == lsm.RejectStale
}
