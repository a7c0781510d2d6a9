package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/names"
)

// A new model source reaches the live service instances: the workflow
// intend.ModelChanged (env/<env>/model/<hash>) signals every one of them
// ModelChangedSignal, and each re-exports its resources itself, the single
// writer of its set, in turn with its own transfers.
const ModelChangedWorkflowName = "intend.ModelChanged"

// NotifyModelChangedActivity signals the environment's live instances
// (activity.go).
var NotifyModelChangedActivity = newActivity[ModelChangedInput, ModelChangedResult]("intend.NotifyModelChanged")

// ModelChangedWorkflowID is the id of the notification of a model source.
func ModelChangedWorkflowID(env, hash string) string { return names.ModelChangedWorkflowID(env, hash) }

// ModelChangedInput names the environment and its new model source.
type ModelChangedInput struct {
	EnvironmentID   string
	EnvironmentName string
	Hash            string
}

// ModelChangedResult counts the instances signalled.
type ModelChangedResult struct {
	Signalled int
}

// ModelChanged runs NotifyModelChanged until it succeeds: an upload that
// stored a new model source is never left unannounced by a crash.
func ModelChanged(ctx workflow.Context, in ModelChangedInput) (ModelChangedResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	return NotifyModelChangedActivity.Run(ctx, in)
}
