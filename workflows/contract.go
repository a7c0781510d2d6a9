// Package workflows holds intend's Temporal workflows. Workflows decide and
// never touch the world: no I/O, no wall clock, no randomness, no map order.
// Every name registered with Temporal is declared here (workflows, signals)
// or as a typed activity handle (activity.go): they are part of intend's
// API (histories, the Temporal UI, other workers).
package workflows

import (
	"maps"
	"slices"
	"time"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/plan"
	"github.com/intendhq/intend/internal/runstages"
)

// TaskQueue is the task queue of the orchestration worker run by
// `intend server`: workflows and the activities that touch PostgreSQL.
const TaskQueue = "intend"

// Workflow names, registered explicitly.
const (
	DeployWorkflowName    = "intend.Deploy"
	SchedulerWorkflowName = "intend.Scheduler"
)

// Activities of the scheduler and the deploy runs, registered explicitly
// under these names (activity.go). ExecuteBatchActivity runs on the
// executors (activities/agent); the others on the orchestration worker.
var (
	TakeRequestsActivity = newActivity[TakeInput, TakeResult]("intend.TakeRequests")

	PlanDeployActivity   = newActivity[PlanInput, PlanResult]("intend.PlanDeploy")
	FinishDeployActivity = newActivityNoResult[FinishInput]("intend.FinishDeploy")
	MarkBatchActivity    = newActivity[MarkBatchInput, MarkBatchResult]("intend.MarkBatch")
	PlanRetryActivity    = newActivity[PlanRetryInput, PlanRetryResult]("intend.PlanRetry")
	RunOutcomeActivity   = newActivity[RunOutcomeInput, RunOutcome]("intend.RunOutcome")
	RouteAgentsActivity  = newActivity[RouteAgentsInput, RouteAgentsResult]("intend.RouteAgents")
	ExecuteBatchActivity = newActivity[BatchInput, BatchResult]("intend.ExecuteBatch")
)

// Signals.
const (
	// WakeSignal tells a scheduler to look at its queue now (payload Wake).
	WakeSignal = "intend.wake"
	// PreemptSignal tells a deploy run to dispatch nothing more, finish the
	// batches in flight and end as preempted, its requests queued again.
	PreemptSignal = "intend.preempt"
)

// Search attributes intend sets on its workflows (see temporal.yaml).
const (
	SearchAttrEnvironment = "IntendEnvironment"
	SearchAttrVersion     = "IntendVersion"
	// SearchAttrRunKind is a deploy run's kind: RunKindDeploy,
	// RunKindRepair or RunKindDryrun, the action its action records carry.
	SearchAttrRunKind = "IntendRunKind"
	// SearchAttrRunResult is how a deploy run (or dry-run) of
	// DeployGeneration 1 or later ended: one of the RunResult values,
	// upserted as it finishes (a run still running has none).
	SearchAttrRunResult = "IntendRunResult"
)

// Run results (SearchAttrRunResult, DeployResult.Result). A run whose
// workflow failed, was cancelled or terminated has none: its workflow
// status says so.
const (
	// RunResultOK: every resource of the run was deployed (a dry-run's:
	// would be).
	RunResultOK = "ok"
	// RunResultFailed: at least one resource failed or was unavailable
	// (no executor took its batch).
	RunResultFailed = "failed"
	// RunResultSkipped: none failed, but some were not deployed: skipped
	// for an undefined dependency, undefined, or report-only and
	// different from their intent.
	RunResultSkipped = "skipped"
	// RunResultPreempted: nothing failed, and the run stopped before it
	// attempted everything (a release came first, or the environment was
	// halted); its requests went back to the queue.
	RunResultPreempted = "preempted"
)

// DeployGeneration is the DeployInput.Generation of the runs this code
// starts. 0: a run of before; 1: the run upserts IntendRunResult and,
// when it left resources undeployed, asks for them (RunOutcomeActivity)
// and writes them to its memo (run_details.go); 2: it dispatches up to 256
// batches at once (MaxInFlight's default), at most 4 of one agent
// (AgentMaxInFlight's default), and a batch that waited its agent_timeout
// in its queue is routed again (RouteAgentsActivity) rather than marked
// unavailable while a live executor serves its agent; 3: the agents that
// share a task queue share batches (PlanInput.Group): 1,000 agents of 20
// resources on one executor are 40 batches, not 1,000.
const DeployGeneration = 3

// Run kinds (SearchAttrRunKind): a run's action, as the API and the
// action log name it.
const (
	RunKindDeploy = string(ledger.ActionDeploy)
	RunKindRepair = string(ledger.ActionRepair)
	RunKindDryrun = string(ledger.ActionDryrun)
)

// AgentTaskQueue is the task queue executors poll for one agent of one
// environment.
func AgentTaskQueue(env, agent string) string { return names.AgentTaskQueue(env, agent) }

// DeployWorkflowID is the id of a deploy run's workflow.
func DeployWorkflowID(env string, run int64) string { return names.DeployWorkflowID(env, run) }

// SchedulerWorkflowID is the id of an environment's scheduler.
func SchedulerWorkflowID(env string) string { return names.SchedulerWorkflowID(env) }

// Wake is the payload of WakeSignal.
type Wake struct {
	Reason string
	// Release: new intent arrived; a running repair-only run is preempted
	// so the changes go first.
	Release bool
	// Halt: the environment was halted; the running run is preempted.
	Halt bool
	// Renew: the scheduler continues as new once idle, to take the
	// options a scheduler starts with now (SchedulerTaskTimeout: one
	// started before keeps Temporal's 10 s until it continues as new).
	Renew bool
}

// DeployOptions tune the deploy runs a scheduler starts.
type DeployOptions struct {
	MaxInFlight      int
	AgentMaxInFlight int `json:",omitempty"`
	Limits           BatchLimits
	AgentWaitSeconds int
}

// SchedulerInput starts (or continues) an environment's scheduler.
type SchedulerInput struct {
	EnvironmentID   string
	EnvironmentName string
	Deploy          DeployOptions
	// PollSeconds is how often an idle scheduler looks at its queue without
	// being woken (default 60): a safety net for lost wake-ups.
	PollSeconds int
	// MaxHistory is the history length after which an idle scheduler
	// continues as new (default 2000).
	MaxHistory int

	// Carried across continue-as-new; zero on a fresh start.
	Continued  bool
	Seq        int64
	NextRetry  time.Time
	NextRepair time.Time
	Woken      bool
}

// TakeInput asks the orchestration worker to turn queued requests into a
// deploy run.
type TakeInput struct {
	EnvironmentID string
	// Token makes the take idempotent across activity retries.
	Token string
	// Timers are requests of due timers (retry, repair); they are queued
	// only when they have anything to do.
	Timers []TimerRequest
	// Adopt returns an open run instead (a fresh scheduler's first take).
	Adopt bool
}

// TimerRequest is a request a scheduler timer makes.
type TimerRequest struct {
	Kind        string // deploy or repair
	Reason      string
	StaleBefore time.Time // repair: resources not attempted since
}

// TakeResult is a take: a run to start (Run > 0), or nothing.
type TakeResult struct {
	Run     int64
	Version int64
	Action  string
	Reason  string
	Kinds   []string
	Halted  bool
	// The environment's intervals, in seconds (0 = off).
	DeployInterval int
	RepairInterval int
	// AgentTimeout is the environment's agent_timeout, in seconds.
	AgentTimeout int
	// The environment's retry_attempts and retry_backoff (seconds).
	RetryAttempts int
	RetryBackoff  int
}

// BatchLimits bound one executor activity's batch (the planner's and the
// store's type).
type BatchLimits = plan.Limits

// DeployInput starts a deploy run. The run itself (version, action, reason)
// is recorded in PostgreSQL before the workflow starts.
type DeployInput struct {
	EnvironmentID   string
	EnvironmentName string
	Run             int64
	Version         int64
	// MaxInFlight bounds the batches dispatched at once (0 = the default:
	// 256; 8 before DeployGeneration 2).
	MaxInFlight int
	// AgentMaxInFlight bounds the batches of one agent dispatched at once
	// (0 = the default: 4; none before DeployGeneration 2), so that one
	// agent's batches never take every slot of the executors its queue
	// shares with other agents.
	AgentMaxInFlight int `json:",omitempty"`
	// Limits bound each batch (zero = the store's defaults).
	Limits BatchLimits
	// AgentWait is how long a batch may wait for an executor of its agent
	// before its resources are marked unavailable (0 = default 10 minutes).
	AgentWaitSeconds int
	// MaxHistory is the history length after which the run continues as
	// new between two levels (0 = default 2000).
	MaxHistory int
	// RetryAttempts is how many times, within the run, a level's resources
	// that failed with a transient or throttled error are tried again
	// before the run moves on (0 = never; the environment's
	// retry_attempts). RetryBackoffSeconds is the wait before the first
	// retry, doubled for each next one; a throttled error's own delay wins
	// when it is longer.
	RetryAttempts       int
	RetryBackoffSeconds int

	// Carried across continue-as-new: the first level still to run and
	// the counts so far.
	FromLevel int
	Carry     *DeployResult
	// CarryFailures are the failures the run shows so far (its current
	// details).
	CarryFailures []ResourceFailure `json:",omitempty"`
	// Generation is the behaviour the run was started with
	// (DeployGeneration when started by this code). Recorded in the input,
	// it lets a replay of an older run keep the older behaviour without a
	// GetVersion marker (an event and a visibility write per run).
	Generation int `json:",omitempty"`
}

// PlanRetryInput asks for a retry batch per agent of a level: the resources
// of batches Seqs whose attempt in this run failed with a transient or
// throttled error, and those skipped because a dependency was not
// deployed. New batches are numbered from NextSeq; the activity is
// idempotent.
type PlanRetryInput struct {
	EnvironmentID string
	Run           int64
	Seqs          []int
	NextSeq       int
}

// PlanRetryResult references the retry batches and says how many of their
// resources had failed and how many had been skipped (the run's counts
// drop by those before the retry counts them again).
type PlanRetryResult struct {
	Batches []BatchRef
	Failed  int
	Skipped int
	// Unavailable: resources whose adapter could not reach their target
	// (zero in histories from before the field).
	Unavailable int `json:",omitempty"`
}

// DeployResult summarises a finished run.
type DeployResult struct {
	Run         int64
	Version     int64
	Halted      bool
	Preempted   bool
	Total       int
	Batches     int
	Deployed    int
	Failed      int
	Skipped     int
	Unavailable int
	Changed     int
	// Result is the run's IntendRunResult (RunResultOK, ...); empty for a
	// run of generation 0 and while the run goes on.
	Result string `json:",omitempty"`
	// Stages is where the run's batches spent their time, carried
	// across continue-as-new (nil in histories from before the field).
	Stages *runstages.Run `json:",omitempty"`
}

// PlanInput asks the orchestration worker to plan a run's batches.
type PlanInput struct {
	EnvironmentID string
	Run           int64
	Limits        BatchLimits
	// Group: the agents that share a task queue (an executor, or a pool
	// of them, serves them all) share batches (DeployGeneration 3).
	Group bool `json:",omitempty"`
}

// BatchRef names one planned batch (the planner's and the store's type).
type BatchRef = plan.Batch

// PlanResult is a run's plan: references only, never resource contents.
type PlanResult struct {
	Version int64
	Action  string
	Halted  bool
	Total   int
	Batches []BatchRef
	// NextSeq is the first batch number not in use (retry batches of
	// earlier levels are not in Batches).
	NextSeq int
	// Undefined counts the resources the plan recorded itself, in no
	// batch: undefined ones and those skipped_for_undefined. They are in
	// Total, and the run counts them as skipped. (Zero in histories from
	// before the field existed.)
	Undefined int
	// Routes are the task queues of the plan's agents: Queues[Routes[a]]
	// is agent a's (store.AgentRoutes). An agent without one goes to its
	// own queue, AgentTaskQueue (every agent, in histories from before).
	Routes Routes `json:",omitempty"`
}

// Routes are task queues by agent: each queue once, and an index into
// them per agent, so that a thousand agents of one embedded executor
// cost a few bytes each in the history.
type Routes struct {
	Queues []string       `json:",omitempty"`
	Agents map[string]int `json:",omitempty"`
}

// NewRoutes packs queues by agent.
func NewRoutes(byAgent map[string]string) Routes {
	r := Routes{Agents: make(map[string]int, len(byAgent))}
	at := map[string]int{}
	for _, a := range slices.Sorted(maps.Keys(byAgent)) {
		q := byAgent[a]
		i, ok := at[q]
		if !ok {
			i = len(r.Queues)
			at[q] = i
			r.Queues = append(r.Queues, q)
		}
		r.Agents[a] = i
	}
	return r
}

// Queue is agent's task queue in environment env.
func (r Routes) Queue(env, agent string) string {
	if i, ok := r.Agents[agent]; ok && i >= 0 && i < len(r.Queues) {
		return r.Queues[i]
	}
	return AgentTaskQueue(env, agent)
}

// with returns r with agent's queue set to queue (r itself unchanged:
// its map may be shared with the plan).
func (r Routes) with(agent, queue string) Routes {
	out := Routes{Queues: slices.Clone(r.Queues), Agents: maps.Clone(r.Agents)}
	if out.Agents == nil {
		out.Agents = map[string]int{}
	}
	i := slices.Index(out.Queues, queue)
	if i < 0 {
		i = len(out.Queues)
		out.Queues = append(out.Queues, queue)
	}
	out.Agents[agent] = i
	return out
}

// RouteAgentsInput asks again where the batches of agents go (a batch
// that waited its agent_timeout in its queue).
type RouteAgentsInput struct {
	EnvironmentID string
	Agents        []string
}

// RouteAgentsResult is where the batches of the agents go now, and which
// of them a live executor serves.
type RouteAgentsResult struct {
	Routes Routes
	Live   []string `json:",omitempty"`
}

// BatchInput is what an executor activity receives: a reference it resolves
// against PostgreSQL.
type BatchInput struct {
	EnvironmentID   string
	EnvironmentName string
	Run             int64
	Seq             int
	Agent           string
	// Agents are the agents of a batch of several (DeployGeneration 3;
	// nil: Agent alone).
	Agents []string `json:",omitempty"`
}

// AgentsOf returns the batch's agents: Agents, or Agent alone.
func (in BatchInput) AgentsOf() []string {
	if len(in.Agents) > 0 {
		return in.Agents
	}
	return []string{in.Agent}
}

// BatchResult counts a batch's outcomes.
type BatchResult struct {
	Deployed int
	Failed   int
	// Skipped counts resources not run because a dependency is not
	// deployed, and report-only resources that differ from their intent.
	Skipped int
	Changed int
	// Unavailable counts the resources whose adapter could not reach
	// their target (zero in histories from before the field).
	Unavailable int `json:",omitempty"`
	// Retry counts the resources that failed with a transient or throttled
	// error (worth another attempt in this run); RetryAfterSeconds is the
	// longest delay a throttled one asked for.
	Retry             int
	RetryAfterSeconds int
	// Failures are the batch's first resources that were not deployed
	// nor skipped (at most MaxBatchFailures, each id and error cut to
	// MaxFailureError bytes): what the run shows in the Temporal UI.
	// Empty in histories from before the field.
	Failures []ResourceFailure `json:",omitempty"`
	// Stages is what the executor measured of the batch: the wait for
	// its poller, its run, its recording (zero in histories from before
	// the field).
	Stages runstages.Batch `json:",omitempty"`
}

// ResourceFailure is one resource a batch did not deploy, and why.
type ResourceFailure struct {
	ID     string
	Result string // failed, unavailable, ...
	Error  string `json:",omitempty"`
}

// Bounds of BatchResult.Failures.
const (
	MaxBatchFailures = 20
	MaxFailureError  = 300
)

// MarkBatchInput records one outcome for every resource of a batch that no
// executor ran (no executor polled the agent, or the activity gave up).
type MarkBatchInput struct {
	EnvironmentID string
	Run           int64
	Seq           int
	Result        string // unavailable or failed
	Reason        string
}

// MarkBatchResult counts the resources MarkBatch marked, and those it left
// with the outcome the batch recorded before it was given up on. A zero
// value (MarkBatch of before the counts) means the whole batch was marked.
type MarkBatchResult struct {
	Marked, Deployed, Failed, Skipped int
}

// RunOutcomeInput asks for the resources a finished run did not deploy,
// at most Limit failed and Limit skipped.
type RunOutcomeInput struct {
	EnvironmentID string
	Run           int64
	Limit         int
}

// RunOutcome is what a run left undeployed, one entry per resource, by
// resource id: the first failed ones (failed or unavailable: the last
// attempt's error, and how many attempts the run made) and the first
// skipped ones (with the reason), and how many there are in all. Ids and
// errors are cut to MaxFailureError bytes.
type RunOutcome struct {
	Failed       []RunResource `json:",omitempty"`
	Skipped      []RunResource `json:",omitempty"`
	FailedCount  int
	SkippedCount int
}

// RunResource is one resource a run did not deploy.
type RunResource struct {
	ID       string
	Result   string
	Error    string `json:",omitempty"`
	Attempts int
}

// FinishInput closes a run.
type FinishInput struct {
	EnvironmentID string
	Run           int64
	Status        string
	Deployed      int
	Failed        int
	Skipped       int
	Unavailable   int
	// Stages is where the run's batches spent their time (nil from a
	// workflow of before the field: the run records none).
	Stages *runstages.Run `json:",omitempty"`
}
