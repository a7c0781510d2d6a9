// Package names builds the Temporal names that several layers must agree on:
// workflow ids and task queues. They are part of intend's operator-facing API.
package names

import "fmt"

// AgentTaskQueue is the task queue executors poll for one agent of one
// environment.
func AgentTaskQueue(env, agent string) string { return "agent/" + env + "/" + agent }

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
