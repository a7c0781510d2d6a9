// Package ledger is the contract between an executor and the side of
// intend that keeps the record: what a batch holds when an executor runs
// it, what an attempt on a resource records, and how an executor reports
// itself. Two implementations hold the record: the store, for the
// executor embedded in intend server, and the intend server's executor
// API, for executors on other hosts, which hold no database credentials
// (internal/executor.Remote).
//
// The package depends on nothing of intend's, so an executor can be built
// without the store.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// ErrNotFound: the batch, run or environment is gone; retrying cannot
// help.
var ErrNotFound = errors.New("not found")

// ErrUnavailable: the record could not be reached (PostgreSQL or the
// intend server down, a connection lost); the same call may succeed
// later, so an executor keeps its work and tries again.
var ErrUnavailable = errors.New("unavailable")

// Resource is one resource of a batch, as an executor receives it.
type Resource struct {
	ID         string          `json:"id"`
	Hash       []byte          `json:"hash"`
	Attributes json.RawMessage `json:"attributes"`
	Purged     bool            `json:"purged,omitempty"`
	// Requires lists the resources this one requires, in this batch or not.
	Requires []string `json:"requires,omitempty"`
	// Action is what the attempt is, for the action log: Deploy when the
	// resource is not compliant, Repair when it is re-verified.
	Action Action `json:"action"`
	// ReportOnly: observe and diff, never change.
	ReportOnly bool `json:"report_only,omitempty"`
	// ReceiveEvents is the resource's receive_events; Event is set when a
	// resource it requires changed after this one's last attempt (the
	// adapter's Reload runs).
	ReceiveEvents bool `json:"receive_events,omitempty"`
	Event         bool `json:"event,omitempty"`
}

// Batch is what an executor loads for one activity.
//
// Resources are in dependency order: a resource comes after every resource
// of the batch it requires. Blocked names the requires outside the batch
// that are not deployed as intended (their last result, e.g. "failed"):
// resources requiring them are skipped.
type Batch struct {
	EnvironmentID string            `json:"environment_id"`
	Blocked       map[string]string `json:"blocked,omitempty"`
	Version       int64             `json:"version"`
	Action        Action            `json:"action"`
	Reason        string            `json:"reason"`
	Agent         string            `json:"agent"`
	// Agents are the agents of a batch of several (nil: Agent alone);
	// its executor serves them all, each with its own concurrency.
	Agents    []string   `json:"agents,omitempty"`
	Resources []Resource `json:"resources"`
	// Recorded are the resources this batch has recorded an attempt of
	// already, in the deploy run's workflow, with their outcome: a
	// retried batch (another activity attempt) runs the others only.
	// Filled in when LoadBatch is asked to resume.
	Recorded map[string]Outcome `json:"recorded,omitempty"`
	// Intended are the changes earlier attempts of the batch, in the
	// deploy run's workflow, recorded the intent of (RecordIntents) and
	// no outcome of: an attempt that died may have made them. Each
	// resource has the intent of the latest attempt. Filled in when
	// LoadBatch is asked to resume.
	Intended map[string]Intent `json:"intended,omitempty"`
	// Plugins are the adapter plugins of the batch's version: a resource
	// whose type one of them serves runs in that plugin, with its
	// artifact for the executor's platform (Ledger.Artifact).
	Plugins []Plugin `json:"plugins,omitempty"`
}

// AgentsOf returns the batch's agents: Agents, or Agent alone.
func (b Batch) AgentsOf() []string {
	if len(b.Agents) > 0 {
		return b.Agents
	}
	return []string{b.Agent}
}

// Intent is an attempt's intent to change a resource, recorded before the
// adapter changes it: when the attempt dies before it records its
// outcome, the next attempt finds the change in place (operation none)
// and records the change this intent names instead.
type Intent struct {
	ResourceID string `json:"resource_id"`
	// Operation is create, update or delete.
	Operation  string `json:"operation"`
	WorkflowID string `json:"workflow_id"`
	Attempt    int    `json:"attempt"`
}

// Outcome is what an attempt recorded.
type Outcome struct {
	Result     Result `json:"result"`
	ErrorClass string `json:"error_class,omitempty"`
	Changed    bool   `json:"changed,omitempty"`
	// Error is the failure's text when the server recorded it itself
	// (a resource outside the environment's confinement), for the run's
	// list of failures; "" otherwise.
	Error string `json:"error,omitempty"`
}

// ActionOf is the action an attempt on r records: a dry-run stays a
// dry-run; otherwise Deploy for a resource that was not compliant and
// Repair for one re-verified.
func (b Batch) ActionOf(r Resource) Action {
	if b.Action == ActionDryrun || r.Action == "" {
		return b.Action
	}
	return r.Action
}

// ActionRecord is one attempt on one resource, for the action log.
type ActionRecord struct {
	ResourceID string    `json:"resource_id"`
	Hash       []byte    `json:"hash"`
	Version    int64     `json:"version"`
	Action     Action    `json:"action"`
	Reason     string    `json:"reason"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Result     Result    `json:"result"`
	Operation  string    `json:"operation,omitempty"` // none, create, update, delete; "" when not reached
	Changed    bool      `json:"changed,omitempty"`
	// Changes is {"attr": {"from": ..., "to": ...}} or nil.
	Changes json.RawMessage `json:"changes,omitempty"`
	// Logs is [adapters.LogLine] or nil.
	Logs json.RawMessage `json:"logs,omitempty"`
	// Facts are the values the adapter discovered on the target, by name,
	// each as JSON.
	Facts map[string]json.RawMessage `json:"facts,omitempty"`
	Error string                     `json:"error,omitempty"`
	// ErrorClass is the adapter error's class (permanent, transient,
	// throttled) when Result is failed.
	ErrorClass string `json:"error_class,omitempty"`
	// RetryAfter is the delay a throttled adapter asked for; it is not
	// stored: the executor reports it to the deploy run.
	RetryAfter time.Duration `json:"-"`
	WorkflowID string        `json:"workflow_id"`
	RunID      string        `json:"run_id"`
	Attempt    int           `json:"attempt"`
	// Executor names the executor that ran the attempt; "" (stored as
	// null) for records no executor made.
	Executor string `json:"executor,omitempty"`
	// Batch is the batch (its seq) the attempt was recorded for; the
	// ledger sets it.
	Batch int `json:"-"`
}

// Ledger is where an executor loads batches and records attempts.
type Ledger interface {
	// LoadBatch reads batch seq of deploy run run with the content of its
	// resources. With resume, the id of the workflow the batch runs in,
	// it also reads what the batch recorded already (Batch.Recorded).
	LoadBatch(ctx context.Context, envID string, run int64, seq int, resume string) (Batch, error)
	// RecordActions appends the attempts of one chunk of batch seq of run
	// to the action log and moves their resources' deploy state, in one
	// transaction. With again set the chunk may have been recorded
	// already (a write whose answer was lost): it is then not recorded
	// twice.
	RecordActions(ctx context.Context, envID string, run int64, seq int, recs []ActionRecord, again bool) error
	// RecordIntents records, before the adapter acts, that an attempt on
	// batch seq of run is about to change these resources. Recording an
	// intent twice is harmless (a write whose answer was lost is
	// repeated).
	RecordIntents(ctx context.Context, envID string, run int64, seq int, intents []Intent) error
	// Artifact opens the content of the artifact digest ("sha256:…") of
	// the environment envID, a plugin of a batch's version: streamed, the
	// caller reads and closes it, and verifies the digest itself. An
	// artifact the environment does not store is ErrNotFound.
	Artifact(ctx context.Context, envID, digest string) (io.ReadCloser, error)
}

// Heartbeat is how often an executor reports itself.
const Heartbeat = 10 * time.Second

// ExecutorReport is an executor's registration in one environment.
type ExecutorReport struct {
	// Name identifies the executor in the environment (by default
	// <hostname>-<pid>); a report under a name replaces the last one.
	Name     string   `json:"name"`
	Hostname string   `json:"hostname"`
	PID      int      `json:"pid"`
	Version  string   `json:"version"`
	Agents   []string `json:"agents"`
	// Embedded: the executor of an intend server.
	Embedded bool `json:"embedded,omitempty"`
	// Pool is the pool the executor joined (empty: the default one of its
	// agents); the server derives the task queue it polls from it
	// (names.ExecutorTaskQueue).
	Pool string `json:"pool,omitempty"`
	// First marks the executor's first report to the environment: it
	// (re)sets started_at.
	First bool `json:"first,omitempty"`
}

// Session is what the intend server tells an executor about the
// environment it serves (GET .../executor/session).
type Session struct {
	Environment struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"environment"`
	// Agents are the agents the caller may serve; null: every agent.
	Agents []string `json:"agents"`
	// OpenVersions are the versions that open deploy runs deploy: an
	// executor's cache keeps values bound to a version while it is open.
	OpenVersions []int64 `json:"open_versions"`
}

// Registry keeps executors' registrations and tells which versions are
// still being deployed (an executor's cache keeps values bound to a
// version only while it is).
type Registry interface {
	// ReportExecutor records that an executor serves agents of the
	// environment named env, now.
	ReportExecutor(ctx context.Context, env string, r ExecutorReport) error
	// StopExecutor records that the executor called name stopped serving
	// the environments named envs.
	StopExecutor(ctx context.Context, name string, envs []string) error
	// OpenRunVersions returns, per environment id among envIDs, the
	// versions that an open (pending or running) deploy run deploys.
	OpenRunVersions(ctx context.Context, envIDs []string) (map[string]map[int64]bool, error)
}

// Plugin is an adapter plugin a version requires: the types it serves and
// the artifact to run per platform.
type Plugin struct {
	Name    string   `json:"name"`              // "kv" (unique within a version)
	Module  string   `json:"module,omitempty"`  // the module that ships it
	Version string   `json:"version,omitempty"` // the module's version, informational
	Runtime string   `json:"runtime"`           // "exec" | "python3"
	Types   []string `json:"types"`             // ["kv::Entry"]; a type is served by one plugin of a version
	// Artifacts maps a platform ("linux/amd64"; "any" for python3) to the
	// artifact's digest, "sha256:<64 hex>".
	Artifacts map[string]string `json:"artifacts"`
}
