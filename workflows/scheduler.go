package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

const (
	defaultPollSeconds = 60
	defaultMaxHistory  = 2000
)

// How soon Temporal gives the work of a worker that died holding it (its
// process killed or crashed: an `intend deploy` interrupted, a replica
// lost) to another worker. Temporal's defaults, a workflow task timeout
// of 10 s and the activities' StartToCloseTimeout, are what a release
// waited after a restart when the previous process died holding the
// scheduler's workflow task or activity (docs/benchmarks.md, P9). A
// scheduler's workflow task is milliseconds of work, a run's a little
// more (its history is larger); the orchestration activities heartbeat
// (activities.heartbeat), so a slow one is not taken for a dead one.
//
// Not shorter: a workflow task that takes longer than its timeout is
// retried, after a full replay, and under heavy load the retry can time
// out again. A scheduler's replay after a cache eviction runs through
// thousands of events; 2 s was too tight on a machine loaded by the whole
// test suite (an order's item waited forever once in CI), 5 s leaves
// room. A run keeps Temporal's 10 s: its history reaches 1,200 events at
// 100,000 resources, and a run taken up 10 s late costs 10 s once.
const (
	SchedulerTaskTimeout   = 5 * time.Second
	RunTaskTimeout         = 10 * time.Second
	OrchestrationHeartbeat = 3 * time.Second
)

// Scheduler is an environment's long-lived coordinator
// (env/<env>/scheduler). It owns no resource state: PostgreSQL holds the
// queue of requests (releases, user deploys and repairs) and the scheduler
// turns all queued requests into one deploy run at a time, so requests
// that arrive while a run is busy are merged into the next one. It adds its
// own requests when the retry (deploy_interval) and repair
// (repair_interval) timers are due, preempts a running repair-only run when
// new intent arrives (changes go first) and any run when the environment
// halts, and continues as new when idle and its history grows.
func Scheduler(ctx workflow.Context, in SchedulerInput) error {
	log := workflow.GetLogger(ctx)
	poll := time.Duration(in.PollSeconds) * time.Second
	if poll <= 0 {
		poll = defaultPollSeconds * time.Second
	}
	maxHistory := in.MaxHistory
	if maxHistory <= 0 {
		maxHistory = defaultMaxHistory
	}
	local := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    OrchestrationHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	info := workflow.GetInfo(ctx)
	wakeCh := workflow.GetSignalChannel(ctx, WakeSignal)

	st := in
	look := in.Woken || !in.Continued // a fresh scheduler looks at once
	adopt := !in.Continued
	nextPoll := workflow.Now(ctx).Add(poll)
	var deployInterval, repairInterval time.Duration

	var child workflow.ChildWorkflowFuture
	var running TakeResult
	preempted, renew := false, false

	for {
		now := workflow.Now(ctx)
		if child == nil {
			timers := dueTimers(now, &st, deployInterval, repairInterval)
			if look || len(timers) > 0 || !now.Before(nextPoll) {
				st.Seq++
				take, err := TakeRequestsActivity.Run(local, TakeInput{
					EnvironmentID: st.EnvironmentID, Token: fmt.Sprintf("%s/%d", info.FirstRunID, st.Seq),
					Timers: timers, Adopt: adopt,
				})
				if err != nil {
					return fmt.Errorf("take requests: %w", err)
				}
				look, adopt = false, false
				nextPoll = workflow.Now(ctx).Add(poll)
				deployInterval = time.Duration(take.DeployInterval) * time.Second
				repairInterval = time.Duration(take.RepairInterval) * time.Second
				armTimers(workflow.Now(ctx), &st, deployInterval, repairInterval)
				if take.Run > 0 {
					running, preempted = take, false
					child = startRun(ctx, st, take)
					log.Info("deploy run started", "run", take.Run, "action", take.Action, "reason", take.Reason)
				}
			}
		}
		if cur := workflow.GetInfo(ctx); child == nil &&
			(cur.GetCurrentHistoryLength() >= maxHistory || cur.GetContinueAsNewSuggested() || renew) {
			for {
				var w Wake
				if !wakeCh.ReceiveAsync(&w) {
					break
				}
				look = true
			}
			next := st
			next.Continued, next.Woken = true, look
			// The next run gets the short task timeout even when this one
			// was started with Temporal's default (before it existed).
			return workflow.NewContinueAsNewError(workflow.WithWorkflowTaskTimeout(ctx, SchedulerTaskTimeout),
				SchedulerWorkflowName, next)
		}

		sel := workflow.NewSelector(ctx)
		sel.AddReceive(wakeCh, func(c workflow.ReceiveChannel, _ bool) {
			var w Wake
			c.Receive(ctx, &w)
			look, renew = true, renew || w.Renew
			if child != nil && !preempted && (w.Halt || (w.Release && !hasKind(running.Kinds, RunKindDeploy))) {
				preempted = true
				log.Info("preempting deploy run", "run", running.Run, "reason", w.Reason)
				_ = child.SignalChildWorkflow(ctx, PreemptSignal, w.Reason).Get(ctx, nil)
			}
		})
		if child != nil {
			sel.AddFuture(child, func(f workflow.Future) {
				var res DeployResult
				if err := f.Get(ctx, &res); err != nil {
					log.Error("deploy run failed", "run", running.Run, "error", err)
					_ = FinishDeployActivity.Run(local, FinishInput{
						EnvironmentID: st.EnvironmentID, Run: running.Run, Status: "failed",
					})
				}
				child = nil
				look = true // requests may have queued meanwhile
			})
		}
		// Timers and polls only matter when idle: while a run works, only
		// its end or a wake-up can change anything.
		tctx, cancel := workflow.WithCancel(ctx)
		if child == nil {
			wait := nextWake(workflow.Now(ctx), nextPoll, &st, deployInterval, repairInterval)
			sel.AddFuture(workflow.NewTimer(tctx, wait), func(workflow.Future) {})
		}
		sel.Select(ctx)
		cancel()
		if err := ctx.Err(); err != nil {
			// Cancelled (the environment is going away): its runs are
			// children and are cancelled with it.
			return err
		}
	}
}

// dueTimers returns the requests of the timers that are due.
func dueTimers(now time.Time, st *SchedulerInput, deployInterval, repairInterval time.Duration) []TimerRequest {
	var out []TimerRequest
	if deployInterval > 0 && !st.NextRetry.IsZero() && !now.Before(st.NextRetry) {
		out = append(out, TimerRequest{Kind: RunKindDeploy, Reason: "retry interval"})
		st.NextRetry = time.Time{}
	}
	if repairInterval > 0 && !st.NextRepair.IsZero() && !now.Before(st.NextRepair) {
		out = append(out, TimerRequest{Kind: RunKindRepair, Reason: "repair interval", StaleBefore: now.Add(-repairInterval)})
		st.NextRepair = time.Time{}
	}
	return out
}

// armTimers sets the timers that are off or later than their interval
// allows (the settings may have changed).
func armTimers(now time.Time, st *SchedulerInput, deployInterval, repairInterval time.Duration) {
	if deployInterval <= 0 {
		st.NextRetry = time.Time{}
	} else if st.NextRetry.IsZero() || st.NextRetry.After(now.Add(deployInterval)) {
		st.NextRetry = now.Add(deployInterval)
	}
	if repairInterval <= 0 {
		st.NextRepair = time.Time{}
	} else if st.NextRepair.IsZero() || st.NextRepair.After(now.Add(repairInterval)) {
		st.NextRepair = now.Add(repairInterval)
	}
}

// nextWake is how long to sleep: until the poll or the first timer.
func nextWake(now, nextPoll time.Time, st *SchedulerInput, deployInterval, repairInterval time.Duration) time.Duration {
	next := nextPoll
	if deployInterval > 0 && !st.NextRetry.IsZero() && st.NextRetry.Before(next) {
		next = st.NextRetry
	}
	if repairInterval > 0 && !st.NextRepair.IsZero() && st.NextRepair.Before(next) {
		next = st.NextRepair
	}
	if d := next.Sub(now); d > time.Millisecond {
		return d
	}
	return time.Millisecond
}

func hasKind(kinds []string, k string) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// startRun starts a deploy run as a child workflow.
func startRun(ctx workflow.Context, st SchedulerInput, take TakeResult) workflow.ChildWorkflowFuture {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            DeployWorkflowID(st.EnvironmentName, take.Run),
		TaskQueue:             TaskQueue,
		TypedSearchAttributes: RunSearchAttributes(st.EnvironmentName, take.Version, take.Action),
		Memo:                  RunMemo(st.EnvironmentName, take.Action, take.Run),
		StaticSummary:         fmt.Sprintf("%s run %d of version %d: %s", take.Action, take.Run, take.Version, take.Reason),
		WorkflowTaskTimeout:   RunTaskTimeout,
	})
	agentWait := st.Deploy.AgentWaitSeconds
	if take.AgentTimeout > 0 {
		agentWait = take.AgentTimeout
	}
	return workflow.ExecuteChildWorkflow(cctx, DeployWorkflowName, DeployInput{
		EnvironmentID: st.EnvironmentID, EnvironmentName: st.EnvironmentName, Run: take.Run, Version: take.Version,
		MaxInFlight: st.Deploy.MaxInFlight, AgentMaxInFlight: st.Deploy.AgentMaxInFlight,
		Limits: st.Deploy.Limits, AgentWaitSeconds: agentWait,
		RetryAttempts: take.RetryAttempts, RetryBackoffSeconds: take.RetryBackoff,
		Generation: DeployGeneration,
	})
}
