// Package activities holds intend's Temporal activities: the only code that
// works on the world. Orchestration activities run on the server's `intend`
// task queue and touch PostgreSQL; executor activities run on agent task
// queues and drive adapters.
package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/workflows"
)

// ErrTypeNotFound is the Temporal error type of activity errors about rows
// that are gone (a deleted environment or run): retrying cannot help.
const ErrTypeNotFound = "NotFound"

// classify marks store errors that retrying cannot fix as non-retryable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNotFound, err)
	}
	return err
}

// Orchestration holds the activities of the `intend` task queue.
type Orchestration struct {
	Store   *store.Store
	Metrics *telemetry.Telemetry // may be nil
	// SignalDeployed sends workflows.DeployedSignal to the workflow of
	// that id; nil: the instances waiting for a run find its outcome at
	// their next poll.
	SignalDeployed func(ctx context.Context, workflowID string) error
	// FactsArrived is told of every finished run: facts the run reported
	// may define resources the released version left undefined, and it
	// queues a compile for them (store.RequestFactsCompile). Best
	// effort; nil: none.
	FactsArrived func(ctx context.Context, envID string) error
	// Routing is what the server knows about its embedded executors, for
	// the routes of the runs' agents (store.AgentRoutes).
	Routing store.RouteOptions
}

// deployedSignals bounds the signals FinishDeploy sends at a time.
const deployedSignals = 16

// Register registers the activities under their explicit names.
func (o *Orchestration) Register(w workflows.ActivityRegistry) {
	workflows.PlanDeployActivity.Register(w, o.PlanDeploy)
	workflows.FinishDeployActivity.Register(w, o.FinishDeploy)
	workflows.MarkBatchActivity.Register(w, o.MarkBatch)
	workflows.PlanRetryActivity.Register(w, o.PlanRetry)
	workflows.TakeRequestsActivity.Register(w, o.TakeRequests)
	workflows.RunOutcomeActivity.Register(w, o.RunOutcome)
	workflows.RouteAgentsActivity.Register(w, o.RouteAgents)
}

// TakeRequests turns the environment's queued requests (and the due
// timers' requests) into one deploy run, idempotently by token.
func (o *Orchestration) TakeRequests(ctx context.Context, in workflows.TakeInput) (workflows.TakeResult, error) {
	defer heartbeat(ctx)()
	timers := make([]store.Request, len(in.Timers))
	for i, t := range in.Timers {
		timers[i] = store.Request{Kind: t.Kind, Reason: t.Reason}
		if !t.StaleBefore.IsZero() {
			sb := t.StaleBefore
			timers[i].StaleBefore = &sb
		}
	}
	t, err := o.Store.TakeRequests(ctx, in.EnvironmentID, in.Token, timers, in.Adopt)
	if err != nil {
		return workflows.TakeResult{}, classify(err)
	}
	out := workflows.TakeResult{Halted: t.Halted, Kinds: t.Kinds,
		DeployInterval: t.Settings.DeployInterval, RepairInterval: t.Settings.RepairInterval,
		AgentTimeout: t.Settings.AgentTimeout, RetryAttempts: t.Settings.RetryAttempts, RetryBackoff: t.Settings.RetryBackoff}
	if t.Run != nil {
		out.Run, out.Version, out.Action, out.Reason = t.Run.Run, t.Run.Version, t.Run.Action, t.Run.Reason
	}
	return out, nil
}

// PlanDeploy plans a run's batches in PostgreSQL (idempotent) and returns
// their references; the undefined resources of the run, and those that
// require one, it records at once (they go to no executor). A halted
// environment gets an empty plan and its run stays pending.
func (o *Orchestration) PlanDeploy(ctx context.Context, in workflows.PlanInput) (workflows.PlanResult, error) {
	defer heartbeat(ctx)()
	env, err := o.Store.GetEnvironment(ctx, in.EnvironmentID)
	if err != nil {
		return workflows.PlanResult{}, classify(err)
	}
	if env.Halted {
		// A halted environment starts nothing, but a dry-run changes
		// nothing and goes ahead.
		run, err := o.Store.GetRun(ctx, in.EnvironmentID, in.Run)
		if err != nil {
			return workflows.PlanResult{}, classify(err)
		}
		if run.Action != string(ledger.ActionDryrun) {
			return workflows.PlanResult{Halted: true}, nil
		}
	}
	limits := in.Limits
	if limits.MaxResources <= 0 {
		limits = store.DefaultBatchLimits
	}
	info := activity.GetInfo(ctx)
	// Grouped (DeployGeneration 3), the agents are routed before they
	// are cut: the agents whose batches go to one shared queue (the
	// embedded executors', a pool's) share batches. An agent's own queue
	// (an executor of that agent alone) is no group.
	var planned map[string]string
	var group store.Grouper
	if in.Group {
		group = func(ctx context.Context, agents []string) (map[string]string, error) {
			rs, err := o.Store.AgentRoutes(ctx, in.EnvironmentID, agents, o.Routing)
			if err != nil {
				return nil, err
			}
			planned = rs.Queues
			groups := make(map[string]string, len(rs.Queues))
			for a, q := range rs.Queues {
				if q != names.AgentTaskQueue(env.Name, a) {
					groups[a] = q
				}
			}
			return groups, nil
		}
	}
	p, err := o.Store.PlanDeployGrouped(ctx, in.EnvironmentID, in.Run, limits,
		store.Caller{RunID: info.WorkflowExecution.RunID, Attempt: int(info.Attempt)}, group)
	if err != nil {
		return workflows.PlanResult{}, classify(err)
	}
	var routes workflows.Routes
	if planned != nil {
		routes = workflows.NewRoutes(planned)
	} else if routes, err = o.routes(ctx, in.EnvironmentID, p.Batches); err != nil {
		return workflows.PlanResult{}, err
	}
	return workflows.PlanResult{Version: p.Version, Action: p.Action, Total: p.Total, NextSeq: p.NextSeq,
		Undefined: p.Undefined, Batches: p.Batches, Routes: routes}, nil
}

// routes are the task queues of the agents of batches.
func (o *Orchestration) routes(ctx context.Context, envID string, batches []workflows.BatchRef) (workflows.Routes, error) {
	seen := map[string]bool{}
	var agents []string
	for _, b := range batches {
		for _, a := range b.AgentsOf() {
			if !seen[a] {
				seen[a] = true
				agents = append(agents, a)
			}
		}
	}
	rs, err := o.Store.AgentRoutes(ctx, envID, agents, o.Routing)
	if err != nil {
		return workflows.Routes{}, classify(err)
	}
	return workflows.NewRoutes(rs.Queues), nil
}

// RouteAgents returns the task queues of agents now: a batch that waited
// its agent_timeout in a queue nobody polled goes where an executor of
// its agent polls since.
func (o *Orchestration) RouteAgents(ctx context.Context, in workflows.RouteAgentsInput) (workflows.RouteAgentsResult, error) {
	rs, err := o.Store.AgentRoutes(ctx, in.EnvironmentID, in.Agents, o.Routing)
	if err != nil {
		return workflows.RouteAgentsResult{}, classify(err)
	}
	out := workflows.RouteAgentsResult{Routes: workflows.NewRoutes(rs.Queues)}
	for _, a := range in.Agents {
		if rs.Live[a] {
			out.Live = append(out.Live, a)
		}
	}
	return out, nil
}

// FinishDeploy records a run's totals and observes its duration (from
// requested_at to finished_at) the first time the run is finished.
func (o *Orchestration) FinishDeploy(ctx context.Context, in workflows.FinishInput) error {
	defer heartbeat(ctx)()
	// Metrics are best effort: their reads never fail the activity. A retry
	// after a commit whose answer was lost finds finished_at set and does not
	// observe the run twice (a crash between the commit and the observation
	// loses it, which a histogram can afford).
	first := false
	if o.Metrics != nil {
		before, err := o.Store.RunTiming(ctx, in.EnvironmentID, in.Run)
		first = err == nil && before.FinishedAt == nil
	}
	if in.Stages != nil {
		if err := o.Store.RecordRunStages(ctx, in.EnvironmentID, in.Run, *in.Stages); err != nil {
			return classify(err)
		}
	}
	if err := o.Store.FinishRun(ctx, in.EnvironmentID, in.Run, in.Status,
		store.RunCounts{Deployed: in.Deployed, Failed: in.Failed, Skipped: in.Skipped, Unavailable: in.Unavailable}); err != nil {
		return classify(err)
	}
	if first {
		if t, err := o.Store.RunTiming(ctx, in.EnvironmentID, in.Run); err == nil && t.FinishedAt != nil {
			o.Metrics.DeployRunDuration.WithLabelValues(t.EnvironmentName, t.Action, t.Status).
				Observe(t.Duration().Seconds())
			if in.Stages != nil {
				o.Metrics.BatchStages.AddRun(t.EnvironmentName, *in.Stages)
			}
		}
	}
	o.tellInstances(ctx, in.EnvironmentID, in.Run)
	if o.FactsArrived != nil {
		if err := o.FactsArrived(ctx, in.EnvironmentID); err != nil {
			activity.GetLogger(ctx).Warn("facts: no compile queued for them; the next run's end tries again",
				"run", in.Run, "error", err)
		}
	}
	return nil
}

// RunOutcome returns the resources a finished run did not deploy, one
// entry per resource (its last attempt in the run), ids and errors cut
// to workflows.MaxFailureError bytes: what the run writes to its memo.
func (o *Orchestration) RunOutcome(ctx context.Context, in workflows.RunOutcomeInput) (workflows.RunOutcome, error) {
	defer heartbeat(ctx)()
	r, err := o.Store.RunNotDeployed(ctx, in.EnvironmentID, in.Run, max(in.Limit, 1))
	if err != nil {
		return workflows.RunOutcome{}, classify(err)
	}
	conv := func(rs []store.RunResource) []workflows.RunResource {
		out := make([]workflows.RunResource, 0, len(rs))
		for _, r := range rs {
			f := workflows.AppendFailure(nil, 1, workflows.ResourceFailure{ID: r.ID, Result: r.Result, Error: r.Error})[0]
			out = append(out, workflows.RunResource{ID: f.ID, Result: f.Result, Error: f.Error, Attempts: r.Attempts})
		}
		return out
	}
	return workflows.RunOutcome{Failed: conv(r.Failed), Skipped: conv(r.Skipped),
		FailedCount: r.FailedCount, SkippedCount: r.SkippedCount}, nil
}

// tellInstances signals the workflows of the service instances whose
// resource sets had resources in the run, so that their deploy waits look
// now rather than at their next poll. It is best effort: a failed read or
// signal (an instance whose workflow has ended) is logged, and the polls
// remain; a retried FinishDeploy signals again, which costs a check.
func (o *Orchestration) tellInstances(ctx context.Context, envID string, run int64) {
	if o.SignalDeployed == nil {
		return
	}
	log := activity.GetLogger(ctx)
	env, insts, err := o.Store.RunServiceInstances(ctx, envID, run)
	if err != nil {
		log.Warn("cannot find the service instances of the run; they will poll", "run", run, "error", err)
		return
	}
	ids := make(chan string)
	var wg sync.WaitGroup
	for range min(deployedSignals, len(insts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if err := o.SignalDeployed(ctx, id); err != nil {
					log.Info("cannot signal a service instance; it will poll", "workflow_id", id, "error", err)
				}
			}
		}()
	}
	for _, i := range insts {
		ids <- names.ServiceInstanceWorkflowID(env, i.Entity, i.ID)
	}
	close(ids)
	wg.Wait()
}

// MarkBatch records the same outcome for every resource of a batch that no
// executor ran (unavailable: nobody took it; failed: its attempts ran
// out), with one action record each. A resource the batch recorded an
// attempt of keeps that record: a batch given up on after it changed
// something does not report the changed resources failed.
func (o *Orchestration) MarkBatch(ctx context.Context, in workflows.MarkBatchInput) (workflows.MarkBatchResult, error) {
	defer heartbeat(ctx)()
	var out workflows.MarkBatchResult
	b, err := o.Store.LoadBatch(ctx, in.EnvironmentID, in.Run, in.Seq)
	if err != nil {
		return out, classify(err)
	}
	info := activity.GetInfo(ctx)
	done, err := o.Store.BatchRecorded(ctx, in.EnvironmentID, info.WorkflowExecution.ID, in.Seq, b.Resources)
	if err != nil {
		return out, err
	}
	for _, d := range done {
		switch d.Result {
		case ledger.ResultDeployed, ledger.ResultUnmanaged:
			out.Deployed++
		case ledger.ResultSkipped, ledger.ResultSkippedForDependency:
			out.Skipped++
		default:
			out.Failed++
		}
	}
	now := nowUTC()
	recs := make([]store.ActionRecord, 0, len(b.Resources))
	for _, r := range b.Resources {
		if _, ok := done[r.ID]; ok {
			continue
		}
		recs = append(recs, store.ActionRecord{
			ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: b.ActionOf(r), Reason: b.Reason,
			StartedAt: now, FinishedAt: now, Result: ledger.Result(in.Result), Error: in.Reason, Batch: in.Seq,
			WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, Attempt: int(info.Attempt),
		})
	}
	if err := o.Store.RecordActions(ctx, in.EnvironmentID, recs); err != nil {
		return out, fmt.Errorf("record %s for batch %d: %w", in.Result, in.Seq, err)
	}
	out.Marked = len(recs)
	return out, nil
}

// PlanRetry makes the retry batches of a level (idempotent) and returns
// their references.
func (o *Orchestration) PlanRetry(ctx context.Context, in workflows.PlanRetryInput) (workflows.PlanRetryResult, error) {
	defer heartbeat(ctx)()
	p, err := o.Store.PlanRetry(ctx, in.EnvironmentID, in.Run, in.Seqs, in.NextSeq)
	if err != nil {
		return workflows.PlanRetryResult{}, classify(err)
	}
	return workflows.PlanRetryResult{Batches: p.Batches, Failed: p.Failed, Skipped: p.Skipped, Unavailable: p.Unavailable}, nil
}
