// Package workflows holds intend's Temporal workflows. Workflows decide and
// never touch the world: no I/O, no wall clock, no randomness, no map order.
// Every name registered with Temporal is a constant here: they are part of
// intend's API (histories, the Temporal UI, other workers).
package workflows

import "github.com/intendhq/intend/internal/names"

// TaskQueue is the task queue of the orchestration worker run by
// `intend server`: workflows and the activities that touch PostgreSQL.
const TaskQueue = "intend"

// Workflow and activity names, registered explicitly.
const (
	DeployWorkflowName = "intend.Deploy"

	PlanDeployActivity   = "intend.PlanDeploy"
	FinishDeployActivity = "intend.FinishDeploy"
	MarkBatchActivity    = "intend.MarkBatch"
	ExecuteBatchActivity = "intend.ExecuteBatch"
)

// Search attributes intend sets on its workflows (see temporal.yaml).
const (
	SearchAttrEnvironment = "IntendEnvironment"
	SearchAttrVersion     = "IntendVersion"
)

// AgentTaskQueue is the task queue executors poll for one agent of one
// environment.
func AgentTaskQueue(env, agent string) string { return names.AgentTaskQueue(env, agent) }

// DeployWorkflowID is the id of a deploy run's workflow.
func DeployWorkflowID(env string, run int64) string { return names.DeployWorkflowID(env, run) }

// BatchLimits bound one executor activity's batch.
type BatchLimits struct {
	MaxResources int
	MaxBytes     int
}

// DeployInput starts a deploy run. The run itself (version, action, reason)
// is recorded in PostgreSQL before the workflow starts.
type DeployInput struct {
	EnvironmentID   string
	EnvironmentName string
	Run             int64
	Version         int64
	// MaxInFlight bounds the batches dispatched at once (0 = default 8).
	MaxInFlight int
	// Limits bound each batch (zero = the store's defaults).
	Limits BatchLimits
	// AgentWait is how long a batch may wait for an executor of its agent
	// before its resources are marked unavailable (0 = default 10 minutes).
	AgentWaitSeconds int
}

// DeployResult summarises a finished run.
type DeployResult struct {
	Run         int64
	Version     int64
	Halted      bool
	Total       int
	Batches     int
	Deployed    int
	Failed      int
	Skipped     int
	Unavailable int
	Changed     int
}

// PlanInput asks the orchestration worker to plan a run's batches.
type PlanInput struct {
	EnvironmentID string
	Run           int64
	Limits        BatchLimits
}

// BatchRef names one planned batch.
type BatchRef struct {
	Seq   int
	Agent string
	Level int
	Count int
	First string
}

// PlanResult is a run's plan: references only, never resource contents.
type PlanResult struct {
	Version int64
	Action  string
	Halted  bool
	Total   int
	Batches []BatchRef
}

// BatchInput is what an executor activity receives: a reference it resolves
// against PostgreSQL.
type BatchInput struct {
	EnvironmentID   string
	EnvironmentName string
	Run             int64
	Seq             int
	Agent           string
}

// BatchResult counts a batch's outcomes.
type BatchResult struct {
	Deployed int
	Failed   int
	// Skipped counts resources not run because a dependency is not deployed.
	Skipped int
	Changed int
}

// MarkBatchInput records one outcome for every resource of a batch that no
// executor ran (no executor polled the agent, or the activity gave up).
type MarkBatchInput struct {
	EnvironmentID string
	Run           int64
	Seq           int
	Result        string // unavailable or failed
	Reason        string
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
}
