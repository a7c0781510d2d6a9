package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// Schedulers drives the workflows of each environment: its scheduler
// (api.Scheduler), its dry-runs (api.Dryruns) and its compile queue
// (api.Compiles).
type Schedulers struct {
	Temporal client.Client
	// Deploy tunes deploy runs; Poll is how often an idle scheduler looks
	// at its queue.
	Deploy workflows.DeployOptions
	Poll   time.Duration
	// BeforeRun, when set, is called before a release wakes a scheduler
	// and before a dry-run starts (the embedded executor serves new
	// agents, so that a run's first batch finds its executor).
	BeforeRun func(ctx context.Context, env store.Environment)
	Log       *slog.Logger

	renewed sync.Map // environment id → true: Renew looked once
}

var (
	_ api.Scheduler = (*Schedulers)(nil)
	_ api.Dryruns   = (*Schedulers)(nil)
	_ api.Compiles  = (*Schedulers)(nil)
)

func (s *Schedulers) schedulerInput(env store.Environment) workflows.SchedulerInput {
	return workflows.SchedulerInput{
		EnvironmentID: env.ID, EnvironmentName: env.Name, Deploy: s.Deploy,
		PollSeconds: int(s.Poll / time.Second),
	}
}

func schedulerOptions(env store.Environment) client.StartWorkflowOptions {
	o := envWorkflowOptions(workflows.SchedulerWorkflowID(env.Name), env.Name, "scheduler of environment "+env.Name)
	o.WorkflowTaskTimeout = workflows.SchedulerTaskTimeout
	return o
}

// envWorkflowOptions starts one of an environment's own workflows (its
// scheduler, compile queue, model announcements, orders): on intend's
// task queue, with its IntendEnvironment, the running one taken when
// there is one, a new one allowed once it ended.
func envWorkflowOptions(id, env, summary string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrEnvironment).ValueSet(env),
		),
		StaticSummary: summary,
	}
}

// Ensure starts the environment's scheduler unless it runs already
// (starting a running one adds nothing to its history).
func (s *Schedulers) Ensure(ctx context.Context, env store.Environment) error {
	if _, err := s.Temporal.ExecuteWorkflow(ctx, schedulerOptions(env), workflows.SchedulerWorkflowName,
		s.schedulerInput(env)); err != nil {
		return fmt.Errorf("start scheduler of %s: %w", env.Name, err)
	}
	return nil
}

// Wake tells the environment's scheduler to look at its queue now,
// starting it when it does not run. A release calls BeforeRun first.
func (s *Schedulers) Wake(ctx context.Context, env store.Environment, reason string, release, halt bool) error {
	if s.BeforeRun != nil && release {
		s.BeforeRun(ctx, env)
	}
	_, err := s.Temporal.SignalWithStartWorkflow(ctx, workflows.SchedulerWorkflowID(env.Name), workflows.WakeSignal,
		workflows.Wake{Reason: reason, Release: release, Halt: halt}, schedulerOptions(env),
		workflows.SchedulerWorkflowName, s.schedulerInput(env))
	if err != nil {
		return fmt.Errorf("wake scheduler of %s: %w", env.Name, err)
	}
	return nil
}

// StartDryrun starts a dry-run's workflow: the deploy workflow with action
// dryrun, outside the scheduler (it changes nothing, so it need not wait).
func (s *Schedulers) StartDryrun(ctx context.Context, env store.Environment, run store.DeployRun) error {
	if s.BeforeRun != nil {
		s.BeforeRun(ctx, env)
	}
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       run.WorkflowID,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    workflows.RunSearchAttributes(env.Name, run.Version, workflows.RunKindDryrun),
		Memo:                     workflows.RunMemo(env.Name, workflows.RunKindDryrun, run.Run),
		StaticSummary:            fmt.Sprintf("dry-run %d of version %d", run.Run, run.Version),
	}, workflows.DeployWorkflowName, workflows.DeployInput{
		EnvironmentID: env.ID, EnvironmentName: env.Name, Run: run.Run, Version: run.Version,
		MaxInFlight: s.Deploy.MaxInFlight, AgentMaxInFlight: s.Deploy.AgentMaxInFlight, Limits: s.Deploy.Limits,
		AgentWaitSeconds: env.Settings.AgentTimeout, Generation: workflows.DeployGeneration,
	})
	if err != nil {
		return fmt.Errorf("start dry-run %d of %s: %w", run.Run, env.Name, err)
	}
	return nil
}

// Stop terminates every running workflow of the environment: its
// scheduler (and with it its deploy runs), its compile queue by their ids
// (visibility may not list a workflow started a moment ago), and every
// other one that carries its IntendEnvironment (dry-runs, service
// instances, orders, model announcements). Workflows that are gone
// already are no error. Activities in flight on executors may still
// report; the store refuses their records once the runs are gone.
func (s *Schedulers) Stop(ctx context.Context, env store.Environment) error {
	const reason = "environment stopped: deleted, cleared or decommissioned"
	ids := []string{workflows.SchedulerWorkflowID(env.Name), workflows.CompileQueueWorkflowID(env.Name)}
	query := fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s'", workflows.SearchAttrEnvironment, env.Name)
	var token []byte
	for {
		resp, err := s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list the workflows of %s: %w", env.Name, err)
		}
		for _, ex := range resp.GetExecutions() {
			if id := ex.GetExecution().GetWorkflowId(); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	for _, id := range ids {
		err := s.Temporal.TerminateWorkflow(ctx, id, "", reason)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("stop %s: %w", id, err)
		}
	}
	return nil
}

func compileQueueOptions(env store.Environment) client.StartWorkflowOptions {
	return envWorkflowOptions(workflows.CompileQueueWorkflowID(env.Name), env.Name, "compile queue of environment "+env.Name)
}

func compileQueueInput(env store.Environment) workflows.CompileQueueInput {
	return workflows.CompileQueueInput{EnvironmentID: env.ID, EnvironmentName: env.Name}
}

// WakeCompiles tells the environment's compile queue to look at its
// queue, starting it when it does not run.
func (s *Schedulers) WakeCompiles(ctx context.Context, env store.Environment, reason string) error {
	_, err := s.Temporal.SignalWithStartWorkflow(ctx, workflows.CompileQueueWorkflowID(env.Name), workflows.CompileSignal,
		workflows.CompileWake{Reason: reason}, compileQueueOptions(env), workflows.CompileQueueWorkflowName,
		compileQueueInput(env))
	if err != nil {
		return fmt.Errorf("wake compile queue of %s: %w", env.Name, err)
	}
	return nil
}

// EnsureCompiles starts the environment's compile queue unless it runs
// already (which adds nothing to its history).
func (s *Schedulers) EnsureCompiles(ctx context.Context, env store.Environment) error {
	if _, err := s.Temporal.ExecuteWorkflow(ctx, compileQueueOptions(env), workflows.CompileQueueWorkflowName,
		compileQueueInput(env)); err != nil {
		return fmt.Errorf("start compile queue of %s: %w", env.Name, err)
	}
	return nil
}

// Quiesce waits, at most max, until the scheduler of env has nothing in
// hand: no workflow task, activity or deploy run pending. Called before
// Shutdown by a process that drove the scheduler itself (`intend
// deploy`), it keeps the scheduler's last steps (the look at the queue
// after a run) from being handed to a worker that is stopping, which
// Temporal then only notices at the task's timeout.
func (s *Schedulers) Quiesce(ctx context.Context, env string, max time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	const every = 10 * time.Millisecond
	for {
		d, err := s.Temporal.DescribeWorkflowExecution(ctx, workflows.SchedulerWorkflowID(env), "")
		if err != nil {
			return fmt.Errorf("describe scheduler of %s: %w", env, err)
		}
		if idle(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scheduler of %s still busy after %s", env, max)
		case <-time.After(every):
		}
	}
}

// idle reports whether a workflow has no task, activity or child pending.
func idle(d *workflowservice.DescribeWorkflowExecutionResponse) bool {
	return d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 &&
		len(d.GetPendingChildren()) == 0
}

// Renew asks the scheduler of env, once per process, to continue as new
// when it runs with another workflow task timeout than
// workflows.SchedulerTaskTimeout: one started before that was set keeps
// Temporal's 10 s until it continues as new (after some 70 deploys).
func (s *Schedulers) Renew(ctx context.Context, env store.Environment) {
	if _, done := s.renewed.LoadOrStore(env.ID, true); done {
		return
	}
	id := workflows.SchedulerWorkflowID(env.Name)
	d, err := s.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		s.renewed.Delete(env.ID) // the next reconcile tries again
		return
	}
	if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		d.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration() == workflows.SchedulerTaskTimeout {
		return
	}
	if err := s.Temporal.SignalWorkflow(ctx, id, "", workflows.WakeSignal,
		workflows.Wake{Reason: "renew: shorter workflow task timeout", Renew: true}); err != nil {
		s.renewed.Delete(env.ID)
		s.Log.Warn("renew the scheduler", "environment", env.Name, "error", err)
	}
}
