package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/runstages"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Register registers intend's workflows under their explicit names.
func Register(w interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}) {
	w.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	w.RegisterWorkflowWithOptions(Scheduler, workflow.RegisterOptions{Name: SchedulerWorkflowName})
}

func workflowRegisterOptions() workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: DeployWorkflowName}
}

const (
	defaultMaxInFlight = 256
	// gen1MaxInFlight is the default of runs of DeployGeneration 1 and
	// before, which replay with it.
	gen1MaxInFlight         = 8
	defaultAgentMaxInFlight = 4
	defaultAgentWait        = 10 * time.Minute
)

// Deploy runs one deploy run: it asks the orchestration worker for the plan
// (batches by requires level and agent), dispatches each batch to its
// agent's task queue with bounded concurrency, level after level, and
// records the totals. Per-resource outcomes are written by the executors;
// the history holds only batch references and counts.
func Deploy(ctx workflow.Context, in DeployInput) (DeployResult, error) {
	log := workflow.GetLogger(ctx)
	res := DeployResult{Run: in.Run, Version: in.Version}
	d := &runDetails{in: in, res: &res, failures: in.CarryFailures}
	d.show(ctx, "planning")

	local := orchestration(ctx, in.Generation >= 2)
	plan, err := orch(local, PlanDeployActivity, PlanInput{
		EnvironmentID: in.EnvironmentID, Run: in.Run, Limits: in.Limits, Group: in.Generation >= 3,
	})
	if err != nil {
		return res, fmt.Errorf("plan: %w", err)
	}
	if in.Carry != nil {
		res = *in.Carry
	} else {
		// Undefined resources and their dependents were recorded by the
		// plan, never dispatched; a continued run carries them already.
		res.Skipped = plan.Undefined
	}
	res.Version, res.Total, res.Batches = plan.Version, plan.Total, len(plan.Batches)
	if plan.Halted {
		log.Info("environment is halted; the run's requests go back to the queue", "run", in.Run)
		res.Halted = true
		conclude(local, ctx, in, d, &res)
		if err := finish(local, ctx, in, "preempted", res); err != nil {
			return res, err
		}
		d.show(ctx, "preempted: the environment is halted")
		return res, nil
	}
	r := &deployRun{ctx: ctx, local: local, in: in, d: d, res: &res,
		preempt:     workflow.GetSignalChannel(ctx, PreemptSignal),
		maxInFlight: in.MaxInFlight, agentWait: time.Duration(in.AgentWaitSeconds) * time.Second,
		routes: plan.Routes}
	if in.Generation >= 2 {
		r.agentMaxInFlight, r.reroute = in.AgentMaxInFlight, true
		if r.agentMaxInFlight <= 0 {
			r.agentMaxInFlight = defaultAgentMaxInFlight
		}
		if r.maxInFlight <= 0 {
			r.maxInFlight = defaultMaxInFlight
		}
	} else if r.maxInFlight <= 0 {
		r.maxInFlight = gen1MaxInFlight
	}
	if r.agentWait <= 0 {
		r.agentWait = defaultAgentWait
	}

	maxHistory := in.MaxHistory
	if maxHistory <= 0 {
		maxHistory = defaultMaxHistory
	}
	r.nextSeq = plan.NextSeq
	for _, b := range plan.Batches {
		r.nextSeq = max(r.nextSeq, b.Seq+1)
	}
	for start := 0; start < len(plan.Batches) && !r.preempted; {
		end := start
		for end < len(plan.Batches) && plan.Batches[end].Level == plan.Batches[start].Level {
			end++
		}
		level := plan.Batches[start].Level
		if level < in.FromLevel {
			start = end // done before continue-as-new
			continue
		}
		if info := workflow.GetInfo(ctx); level > in.FromLevel &&
			(info.GetCurrentHistoryLength() >= maxHistory || info.GetContinueAsNewSuggested()) {
			// Long runs (many levels: requires chains across agents)
			// continue as new between levels; the plan stays in
			// PostgreSQL, so the next run fetches it again.
			var reason string
			if r.preempt.ReceiveAsync(&reason) {
				r.preempted = true
				break
			}
			next := in
			res.Stages = endSegment(ctx, res.Stages)
			next.FromLevel, next.Carry, next.CarryFailures = level, &res, d.failures
			return res, workflow.NewContinueAsNewError(ctx, DeployWorkflowName, next)
		}
		var st levelStats
		d.show(ctx, fmt.Sprintf("running requires level %d", level))
		if err := r.runLevel(plan.Batches[start:end], &st); err != nil {
			return res, err
		}
		if err := r.retryLevel(plan.Batches[start:end], st); err != nil {
			return res, err
		}
		start = end
	}

	status := "done"
	if r.preempted {
		status = "preempted"
		res.Preempted = true
	}
	// Concluded before finish: once PostgreSQL says the run is done,
	// its history holds its outcome.
	conclude(local, ctx, in, d, &res)
	if err := finish(local, ctx, in, status, res); err != nil {
		return res, err
	}
	d.show(ctx, status)
	log.Info("deploy finished", "run", in.Run, "version", res.Version, "total", res.Total,
		"deployed", res.Deployed, "failed", res.Failed, "skipped", res.Skipped, "unavailable", res.Unavailable)
	return res, nil
}

// localKey marks a context whose orchestration activities run as local
// activities.
type localKey struct{}

// orchestration returns the context of a run's orchestration activities
// (plan, finish, mark, retry, route, outcome): on the task queue "intend",
// or, from DeployGeneration 2, as local activities of the worker that runs
// the workflow, which saves a workflow task and its round trips through
// Temporal per call (they all touch PostgreSQL only, and are idempotent).
func orchestration(ctx workflow.Context, local bool) workflow.Context {
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute}
	if local {
		ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: 2 * time.Minute, RetryPolicy: retry,
		})
		return workflow.WithValue(ctx, localKey{}, true)
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    OrchestrationHeartbeat,
		RetryPolicy:         retry,
	})
}

// orch runs the orchestration activity a in a context of orchestration
// and waits for its result.
func orch[In, Out any](ctx workflow.Context, a Activity[In, Out], in In) (Out, error) {
	if local, _ := ctx.Value(localKey{}).(bool); local {
		return a.RunLocal(ctx, in)
	}
	return a.Run(ctx, in)
}

// orchNoResult is orch for an activity without a result.
func orchNoResult[In any](ctx workflow.Context, a ActivityNoResult[In], in In) error {
	if local, _ := ctx.Value(localKey{}).(bool); local {
		return a.RunLocal(ctx, in)
	}
	return a.Run(ctx, in)
}

func finish(local, ctx workflow.Context, in DeployInput, status string, res DeployResult) error {
	res.Stages = endSegment(ctx, res.Stages)
	if err := orchNoResult(local, FinishDeployActivity, FinishInput{
		EnvironmentID: in.EnvironmentID, Run: in.Run, Status: status,
		Deployed: res.Deployed, Failed: res.Failed, Skipped: res.Skipped, Unavailable: res.Unavailable,
		Stages: res.Stages,
	}); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

// deployRun is the state of one Deploy run that its levels share: where
// its activities go, its input, totals and details, its limits, the
// preempt signal and whether it came, and the next batch sequence number.
type deployRun struct {
	ctx, local  workflow.Context
	in          DeployInput
	d           *runDetails
	res         *DeployResult
	maxInFlight int
	// agentMaxInFlight bounds one agent's batches in flight (0: none).
	agentMaxInFlight int
	agentWait        time.Duration
	// routes are the agents' task queues; reroute: a batch that waited
	// agentWait is routed again (DeployGeneration 2).
	routes    Routes
	reroute   bool
	preempt   workflow.ReceiveChannel
	preempted bool
	nextSeq   int
}

// maxReroutes bounds how often one batch is sent to a new queue, or to
// its queue again, after waiting agentWait there.
const maxReroutes = 10

// levelStats is what the batches of a level report about retrying.
type levelStats struct {
	retry      int // resources that failed with a transient or throttled error
	retryAfter int // seconds: the longest delay a throttled one asked for
}

// maxRetryDelay caps the wait before a retry, whatever a target asked for.
const maxRetryDelay = 15 * time.Minute

// retryLevel tries a level's resources that failed with a transient or
// throttled error again, up to in.RetryAttempts times, after a backoff
// (doubling from in.RetryBackoffSeconds, or the delay a throttled target
// asked for when longer), before the run moves on to the next level, so
// that their dependents get their chance in this run. Resources skipped
// for a dependency are retried with them. A preempt signal ends the wait.
func (r *deployRun) retryLevel(batches []BatchRef, st levelStats) error {
	ctx, in, d, res := r.ctx, r.in, r.d, r.res
	backoff := time.Duration(max(in.RetryBackoffSeconds, 1)) * time.Second
	for attempt := 1; attempt <= in.RetryAttempts && st.retry > 0 && !r.preempted; attempt++ {
		delay := min(backoff<<(attempt-1), maxRetryDelay)
		if ra := time.Duration(st.retryAfter) * time.Second; ra > delay {
			delay = min(ra, maxRetryDelay)
		}
		workflow.GetLogger(ctx).Info("retrying failed resources", "run", in.Run, "level", batches[0].Level,
			"resources", st.retry, "attempt", attempt, "after", delay)
		d.show(ctx, fmt.Sprintf("requires level %d: retrying %d resources in %s (attempt %d of %d)",
			batches[0].Level, st.retry, delay, attempt, in.RetryAttempts))
		tctx, cancel := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(workflow.NewTimer(tctx, delay), func(workflow.Future) {})
		sel.AddReceive(r.preempt, r.onPreempt)
		sel.Select(ctx)
		cancel()
		if r.preempted {
			return nil
		}
		seqs := make([]int, len(batches))
		for i, b := range batches {
			seqs[i] = b.Seq
		}
		rp, err := orch(r.local, PlanRetryActivity, PlanRetryInput{
			EnvironmentID: in.EnvironmentID, Run: in.Run, Seqs: seqs, NextSeq: r.nextSeq,
		})
		if err != nil {
			return fmt.Errorf("plan retry: %w", err)
		}
		if len(rp.Batches) == 0 {
			return nil
		}
		for _, b := range rp.Batches {
			r.nextSeq = max(r.nextSeq, b.Seq+1)
		}
		res.Failed -= rp.Failed
		res.Skipped -= rp.Skipped
		res.Unavailable -= rp.Unavailable
		res.Batches += len(rp.Batches)
		batches, st = rp.Batches, levelStats{}
		d.show(ctx, fmt.Sprintf("requires level %d: retry %d of %d", batches[0].Level, attempt, in.RetryAttempts))
		if err := r.runLevel(batches, &st); err != nil {
			return err
		}
	}
	return nil
}

// onPreempt is the selector callback of the preempt signal: it takes the
// signal and marks the run preempted.
func (r *deployRun) onPreempt(c workflow.ReceiveChannel, _ bool) {
	var reason string
	c.Receive(r.ctx, &reason)
	r.preempted = true
	workflow.GetLogger(r.ctx).Info("deploy run preempted", "run", r.in.Run, "reason", reason)
}

// runLevel dispatches the batches of one requires level, at most
// maxInFlight at a time and at most agentMaxInFlight of one agent, in
// order (a batch whose agent is at its bound lets the next ones go
// first), and waits for those dispatched. A preempt signal stops the
// dispatching; the batches in flight finish.
func (r *deployRun) runLevel(batches []BatchRef, st *levelStats) error {
	ctx := r.ctx
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(r.preempt, r.onPreempt)
	l := &levelRun{r: r, st: st, sel: sel, perAgent: map[string]int{}}
	// The level's batches are ready from now: until a slot frees they
	// are queued in the workflow (workflow.Now: the time of the workflow
	// task, the same on replay).
	l.ready = workflow.Now(ctx)
	pending := batches
	if r.agentMaxInFlight > 0 {
		pending = slices.Clone(batches)
	}
	for (len(pending) > 0 && !r.preempted) || l.inFlight > 0 {
		if len(pending) > 0 && !r.preempted && l.inFlight < r.maxInFlight {
			i := 0
			if r.agentMaxInFlight > 0 {
				i = slices.IndexFunc(pending, l.mayGo)
			}
			if i >= 0 {
				b := pending[i]
				if r.agentMaxInFlight > 0 {
					pending = slices.Delete(pending, i, i+1)
				} else {
					pending = pending[1:]
				}
				r.stages().Queued.Observe(workflow.Now(ctx).Sub(l.ready).Seconds())
				l.dispatch(b, 0)
				continue
			}
		}
		sel.Select(ctx)
		if l.fatal != nil {
			return l.fatal
		}
	}
	return l.fatal
}

// levelRun is one level's dispatching: its selector, the batches in
// flight (in all and per agent), and the first error that ends the run.
type levelRun struct {
	r        *deployRun
	st       *levelStats
	sel      workflow.Selector
	ready    time.Time
	inFlight int
	perAgent map[string]int
	fatal    error
}

// mayGo reports whether every agent of batch b has fewer than
// agentMaxInFlight batches in flight: a batch of several agents counts
// against each of them.
func (l *levelRun) mayGo(b BatchRef) bool {
	if len(b.Agents) == 0 {
		return l.perAgent[b.Agent] < l.r.agentMaxInFlight
	}
	for _, a := range b.Agents {
		if l.perAgent[a] >= l.r.agentMaxInFlight {
			return false
		}
	}
	return true
}

// count adds n to the batches in flight of each agent of b.
func (l *levelRun) count(b BatchRef, n int) {
	for _, a := range b.AgentsOf() {
		l.perAgent[a] += n
	}
}

// dispatch sends batch b to its agent's task queue (a batch of several
// agents: the queue they share); reroutes counts the times it was sent
// again after waiting there.
func (l *levelRun) dispatch(b BatchRef, reroutes int) {
	r, ctx, in := l.r, l.r.ctx, l.r.in
	l.inFlight++
	l.count(b, 1)
	stages := r.stages()
	stages.MaxInFlight = max(stages.MaxInFlight, l.inFlight)
	queue := r.routes.Queue(in.EnvironmentName, b.Agent)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: r.agentWait,
		StartToCloseTimeout:    30 * time.Minute,
		HeartbeatTimeout:       20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10,
		},
		Summary: batchSummary(b),
	})
	f := ExecuteBatchActivity.Start(actx, BatchInput{
		EnvironmentID: in.EnvironmentID, EnvironmentName: in.EnvironmentName,
		Run: in.Run, Seq: b.Seq, Agent: b.Agent, Agents: b.Agents,
	})
	l.sel.AddFuture(f.Future, func(workflow.Future) {
		l.inFlight--
		l.count(b, -1)
		br, err := f.Get(ctx)
		if err == nil {
			l.done(br)
			return
		}
		result, reason := string(ledger.ResultFailed), "executor gave up: "+rootMessage(err)
		if isScheduleToStartTimeout(err) {
			result = string(ledger.ResultUnavailable)
			reason = fmt.Sprintf("no executor polled task queue %s within %s", queue, r.agentWait)
			if r.reroute && reroutes < maxReroutes {
				again, apart, err := l.routeAgain(b, queue)
				if err != nil {
					l.fatal = err
					return
				}
				if again {
					l.dispatch(b, reroutes+1)
					return
				}
				if apart != "" {
					reason = apart
				}
			}
		}
		l.mark(b, result, reason)
	})
}

// routeAgain asks where b's agents' batches go now, after b waited
// agentWait in queue: again when that is another queue, or when a live
// executor serves an agent of it (its batches wait behind others, it is
// not gone). It updates the run's routes. A batch of several agents that
// now go to different queues cannot go to any of them whole (an executor
// runs the batches of its own agents only): apart says why, and the
// batch is marked unavailable (the next deploy routes its agents apart).
func (l *levelRun) routeAgain(b BatchRef, queue string) (again bool, apart string, err error) {
	r := l.r
	agents := b.AgentsOf()
	rr, err := orch(r.local, RouteAgentsActivity, RouteAgentsInput{
		EnvironmentID: r.in.EnvironmentID, Agents: agents,
	})
	if err != nil {
		return false, "", fmt.Errorf("route agent %s: %w", strings.Join(agents, ", "), err)
	}
	now := rr.Routes.Queue(r.in.EnvironmentName, b.Agent)
	for _, a := range agents {
		q := rr.Routes.Queue(r.in.EnvironmentName, a)
		if q != r.routes.Queue(r.in.EnvironmentName, a) {
			r.routes = r.routes.with(a, q)
		}
		if q != now && apart == "" {
			apart = fmt.Sprintf("no executor polled task queue %s within %s, and the batch's agents go to different "+
				"queues now (%s: %s, %s: %s)", queue, r.agentWait, b.Agent, now, a, q)
		}
	}
	if apart == "" {
		again = now != queue || slices.ContainsFunc(agents, func(a string) bool { return slices.Contains(rr.Live, a) })
	}
	workflow.GetLogger(r.ctx).Info("batch waited its agent timeout in its task queue", "run", r.in.Run,
		"batch", b.Seq, "agents", agents, "task_queue", queue, "now", now, "again", again, "apart", apart != "")
	return again, apart, nil
}

// done adds a batch's outcome to the run.
func (l *levelRun) done(br BatchResult) {
	r, st := l.r, l.st
	stages := r.stages()
	stages.PollWait.Observe(br.Stages.PollWait)
	stages.Execute.Observe(br.Stages.Execute)
	stages.Record.Observe(br.Stages.Record)
	r.res.Deployed += br.Deployed
	r.res.Failed += br.Failed
	r.res.Skipped += br.Skipped
	r.res.Unavailable += br.Unavailable
	r.res.Changed += br.Changed
	st.retry += br.Retry
	st.retryAfter = max(st.retryAfter, br.RetryAfterSeconds)
	r.d.add(br.Failures)
	r.d.show(r.ctx, r.d.status)
}

// mark records every resource of a batch that no executor ran (result
// unavailable) or whose executor gave up (failed).
func (l *levelRun) mark(b BatchRef, result, reason string) {
	r, ctx, in, res := l.r, l.r.ctx, l.r.in, l.r.res
	mr, merr := orch(r.local, MarkBatchActivity, MarkBatchInput{
		EnvironmentID: in.EnvironmentID, Run: in.Run, Seq: b.Seq, Result: result, Reason: reason,
	})
	if merr != nil {
		l.fatal = fmt.Errorf("mark batch %d %s: %w", b.Seq, result, merr)
		return
	}
	if mr == (MarkBatchResult{}) {
		mr.Marked = b.Count // recorded before MarkBatch counted
	}
	if result == string(ledger.ResultUnavailable) {
		res.Unavailable += mr.Marked
	} else {
		res.Failed += mr.Marked
	}
	res.Deployed += mr.Deployed
	res.Failed += mr.Failed
	res.Skipped += mr.Skipped
	r.d.add([]ResourceFailure{{ID: batchSummary(b), Result: result, Error: reason}})
	r.d.show(ctx, r.d.status)
}

// stages returns the run's stage measurements, started on first use.
func (r *deployRun) stages() *runstages.Run {
	if r.res.Stages == nil {
		r.res.Stages = &runstages.Run{}
	}
	return r.res.Stages
}

// endSegment adds the length of this history to the run's stages, before
// it finishes or continues as new. A run that dispatched nothing has none.
func endSegment(ctx workflow.Context, s *runstages.Run) *runstages.Run {
	if s == nil {
		return nil
	}
	c := *s
	c.HistoryEvents += workflow.GetInfo(ctx).GetCurrentHistoryLength()
	c.Segments++
	return &c
}

func batchSummary(b BatchRef) string {
	if b.Count <= 1 {
		return b.First
	}
	return fmt.Sprintf("%s and %d more", b.First, b.Count-1)
}

func isScheduleToStartTimeout(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

func rootMessage(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
