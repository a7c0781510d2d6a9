// Package names builds the Temporal names that several layers must agree on:
// workflow ids and task queues. They are part of intend's operator-facing API.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// AgentTaskQueue is the task queue of one agent of one environment: the
// queue an executor serving that agent alone polls, and where a batch
// goes whose agent no executor is known to serve (docs/architecture.md,
// "Dispatch at scale").
func AgentTaskQueue(env, agent string) string { return "agent/" + env + "/" + agent }

// EmbeddedTaskQueue is the task queue the embedded executors of one
// environment poll, for every agent they serve.
func EmbeddedTaskQueue(env string) string { return "executors/" + env + "/embedded" }

// PoolTaskQueue is the task queue of the executors of one pool of an
// environment: executors that serve the same agents and share their
// batches.
func PoolTaskQueue(env, pool string) string { return "executors/" + env + "/pool/" + pool }

// CheckPool refuses a pool name that is not 1 to 128 letters, digits,
// dots, dashes and underscores (empty is the default pool).
func CheckPool(pool string) error {
	if len(pool) > 128 {
		return fmt.Errorf("%d characters: at most 128", len(pool))
	}
	for _, r := range pool {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("%q: letters, digits, dots, dashes and underscores only", pool)
		}
	}
	return nil
}

// DefaultPool is the pool of an executor that names none: one per set of
// agents, so that executors configured alike share their batches and
// executors configured otherwise never take each other's.
func DefaultPool(agents []string) string {
	s := slices.Sorted(slices.Values(agents))
	sum := sha256.Sum256([]byte(strings.Join(slices.Compact(s), "\x00")))
	return "agents-" + hex.EncodeToString(sum[:6])
}

// ExecutorTaskQueue is the one task queue an executor polls: the
// environment's embedded queue for an embedded executor; else its pool's;
// and, for an executor that names no pool and serves one agent, that
// agent's own queue (where its batches wait even before it first
// registers).
func ExecutorTaskQueue(env, pool string, agents []string, embedded bool) string {
	switch {
	case embedded:
		return EmbeddedTaskQueue(env)
	case pool != "":
		return PoolTaskQueue(env, pool)
	case len(slices.Compact(slices.Sorted(slices.Values(agents)))) == 1:
		return AgentTaskQueue(env, agents[0])
	default:
		return PoolTaskQueue(env, DefaultPool(agents))
	}
}

// DeployWorkflowID is the id of a deploy run's workflow.
func DeployWorkflowID(env string, run int64) string { return fmt.Sprintf("env/%s/deploy/%d", env, run) }

// SchedulerWorkflowID is the id of an environment's scheduler workflow.
func SchedulerWorkflowID(env string) string { return "env/" + env + "/scheduler" }

// DryrunWorkflowID is the id of a dry-run's workflow.
func DryrunWorkflowID(env string, run int64) string { return fmt.Sprintf("env/%s/dryrun/%d", env, run) }

// ServiceInstanceWorkflowID is the id of a service instance's workflow.
func ServiceInstanceWorkflowID(env, entity, id string) string {
	return "lsm/" + env + "/" + entity + "/" + id
}

// ModelChangedWorkflowID is the id of the workflow that tells an
// environment's service instances about a new model source.
func ModelChangedWorkflowID(env, hash string) string { return "env/" + env + "/model/" + hash }
