package workflows

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/names"
)

// Names of the lifecycle engine (docs/architecture.md, "The lifecycle
// service manager"), registered explicitly as the others in contract.go.
const (
	ServiceInstanceWorkflowName = "intend.ServiceInstance"

	// The updates of an instance's workflow. CreateUpdate is the first,
	// sent with update-with-start.
	CreateUpdate   = "create"
	UpdateUpdate   = "update"
	SetStateUpdate = "set_state"
	DeleteUpdate   = "delete"

	// DeployedSignal tells an instance's workflow that a deploy run ended
	// that may have deployed its resources: it checks at once instead of
	// at its next poll (no payload).
	DeployedSignal = "intend.lsm.deployed"
	// ModelChangedSignal tells an instance's workflow that the
	// environment has a new model source: a state that exports the
	// instance's resources exports them again, built by the new model
	// (payload: the model source's hash).
	ModelChangedSignal = "intend.lsm.model_changed"
)

// Activities of an instance's workflow, run as local activities
// (activity.go).
var (
	ApplyTransferActivity       = newActivity[ApplyTransferInput, ServiceInstanceRecord]("intend.ApplyTransfer")
	ValidateInstanceActivity    = newActivity[ValidateInstanceInput, ValidateInstanceResult]("intend.ValidateInstance")
	ExportInstanceActivity      = newActivity[ExportInstanceInput, ExportInstanceResult]("intend.ExportInstance")
	CheckInstanceDeployActivity = newActivity[CheckInstanceDeployInput, CheckInstanceDeployResult]("intend.CheckInstanceDeploy")
	LoadInstanceActivity        = newActivity[LoadInstanceInput, *InstanceSnapshot]("intend.LoadInstance")
	AllocateValuesActivity      = newActivity[AllocateValuesInput, map[string]any]("intend.AllocateValues")
)

// Search attributes of an instance's workflow, besides
// SearchAttrEnvironment (see temporal.yaml).
const (
	SearchAttrServiceEntity   = "IntendServiceEntity"
	SearchAttrServiceInstance = "IntendServiceInstance"
)

// Export modes of ExportInstance.
const (
	// ExportResources exports the instance's resources built from its
	// active set.
	ExportResources = "export"
	// ExportPurged exports them purged (their removal).
	ExportPurged = "purge"
	// ExportRemove removes the instance's set from the model.
	ExportRemove = "remove"
)

// Outcomes of CheckInstanceDeploy.
const (
	DeployDone    = "done"
	DeployFailed  = "failed"
	DeployPending = "pending"
)

// Defaults of the instance workflow.
const (
	// defaultMaxTransfers is how many transfers a run applies before it
	// continues as new (each costs a handful of events).
	defaultMaxTransfers = 200
	// deployPollFirst and deployPollMax bound the deploy wait's polls.
	// The polls are the fallback: the deploy run's end signals the
	// instances it deployed (DeployedSignal), so on a running server the
	// first poll, 5 s after the export, rarely fires; every poll that
	// fires is a workflow task of its own. Runs recorded before
	// timerCancelVersion polled first after 1 s.
	deployPollFirst   = 5 * time.Second
	deployPollFirstV0 = time.Second
	deployPollMax     = 30 * time.Second
	// createWait is how long a workflow started without its create
	// update waits for it before ending.
	createWait = 10 * time.Minute
	// lostCreateWait is how long a fresh workflow waits for its create
	// update before it looks for the instance in PostgreSQL.
	lostCreateWait = 20 * time.Second
)

// ServiceInstanceWorkflowID is the id of a service instance's workflow.
func ServiceInstanceWorkflowID(env, entity, id string) string {
	return names.ServiceInstanceWorkflowID(env, entity, id)
}

// ServiceInstanceSearchAttributes are the search attributes of an
// instance's workflow at its start; state is the instance's state when
// known ("": a create, whose workflow sets it once the create is
// applied).
func ServiceInstanceSearchAttributes(env, entity, id, state string) temporal.SearchAttributes {
	updates := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword(SearchAttrEnvironment).ValueSet(env),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrServiceEntity).ValueSet(entity),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrServiceInstance).ValueSet(id),
	}
	if state != "" {
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(SearchAttrInstanceState).ValueSet(state))
	}
	return temporal.NewSearchAttributes(updates...)
}

// RegisterServiceInstance registers the instance workflow and the model
// change notification under their names.
func RegisterServiceInstance(w interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}) {
	w.RegisterWorkflowWithOptions(ServiceInstance, workflow.RegisterOptions{Name: ServiceInstanceWorkflowName})
	w.RegisterWorkflowWithOptions(ModelChanged, workflow.RegisterOptions{Name: ModelChangedWorkflowName})
}

// ServiceInstanceInput starts (or continues) an instance's workflow. It
// carries what the update validators need to judge a request without
// I/O: the entity's attributes, lifecycle and identity.
type ServiceInstanceInput struct {
	EnvironmentID   string
	EnvironmentName string
	Entity          lsm.Entity
	InstanceID      string
	// MaxTransfers is how many transfers a run applies before it
	// continues as new (0: 200).
	MaxTransfers int
	// Snapshot is the instance as the previous run left it; nil on a
	// fresh start, which waits for the create update.
	Snapshot *InstanceSnapshot
	// AutoTransfersOff: the entity's config turned its auto transfers
	// off (lsm_config.go); ConfigChangedSignal changes it.
	AutoTransfersOff bool `json:",omitempty"`
	// AutoTransferConfigs is the entity's config per config name,
	// InstanceAutoTransfersOff and InstanceAutoTransferConfigs the
	// instance's own config (lsm_config.go, lsm.AutoConfig);
	// ConfigChangedSignal and InstanceConfigChangedSignal change them.
	AutoTransferConfigs         map[string]bool `json:",omitempty"`
	InstanceAutoTransfersOff    bool            `json:",omitempty"`
	InstanceAutoTransferConfigs map[string]bool `json:",omitempty"`
	// Generation is the workflow's behaviour its run was started with
	// (InstanceGeneration when started by this code). Recorded in the
	// input, it lets a replay of an older run keep the older behaviour
	// without a GetVersion marker: each GetVersion is an event and an
	// upsert of the TemporalChangeVersion search attribute, a write of
	// the Temporal server's visibility store, per run. 0: decided by the
	// load-lost-create and cancel-await-timers changes; 1: a fresh run
	// looks for a lost create, and waits cancel their timers; 2: and
	// the run keeps IntendInstanceState up to date (lsm_details.go).
	Generation int `json:",omitempty"`
}

// InstanceGeneration is the Generation of the instance workflows this
// code starts; a continued run keeps its run's.
const InstanceGeneration = 2

// InstanceSnapshot is an instance's state as the workflow holds it.
type InstanceSnapshot struct {
	State    string
	Version  int64
	Identity string
	Sets     lsm.Sets
	// Export is the last export made for the instance, if any.
	Export *InstanceExport
	// Entities are the versions of the entity the instance's sets are
	// of besides ServiceInstanceInput.Entity's (a migration brings its
	// target's: lsm_versions.go).
	Entities []lsm.Entity `json:",omitempty"`
}

// InstanceExport records an export of the instance's set: what it was
// made for and where to look for its deploy.
type InstanceExport struct {
	// InstanceVersion is the instance version it was made for; Mode is
	// ExportResources, ExportPurged or ExportRemove; Attributes the
	// active set it was built from.
	InstanceVersion int64
	Mode            string
	Attributes      map[string]any
	// Result is ExportInstance's.
	Result ExportInstanceResult
}

// CreateRequest is the create update: the client's attributes.
type CreateRequest struct {
	Attributes map[string]any
	Request    *lsm.IdempotentRequest
	// Actor is who asked (auth.Principal.Actor), for the instance's log.
	Actor string
	// InitialState is the state the instance begins in, one the
	// lifecycle allows (lsm.Lifecycle.Initial); "": its start state.
	// Left out of the payload when empty, as recorded histories have it.
	InitialState string `json:",omitempty"`
}

// UpdateRequest is the update update: the whole new candidate set (the
// API applies the client's edits to the current one first).
type UpdateRequest struct {
	CurrentVersion int64
	Attributes     map[string]any
	Request        *lsm.IdempotentRequest
	Actor          string
}

// SetStateRequest is the set_state update: an api transfer to Target.
type SetStateRequest struct {
	CurrentVersion int64
	Target         string
	Request        *lsm.IdempotentRequest
	Actor          string
}

// DeleteRequest is the delete update: the on_delete transfer.
type DeleteRequest struct {
	CurrentVersion int64
	Request        *lsm.IdempotentRequest
	Actor          string
}

// IllegalDetails are the details of an lsm.RejectIllegal rejection.
type IllegalDetails struct {
	State   string      `json:"state"`
	Allowed []lsm.Event `json:"allowed"`
}

// ServiceInstanceRecord is an instance as written, what every update
// returns.
type ServiceInstanceRecord = lsm.Instance

// TransferEvent is what caused a version, as the instance's log keeps it.
type TransferEvent struct {
	// Trigger is create or a lifecycle trigger.
	Trigger    string          `json:"trigger"`
	Source     string          `json:"source,omitempty"`
	Target     string          `json:"target"`
	Error      bool            `json:"error"`
	Operations []lsm.Operation `json:"operations"`
	// Request is the Idempotency-Key of the request behind it, if any.
	Request string `json:"request,omitempty"`
	// Actor is who asked for it (token:NAME, oidc:SUBJECT); absent for
	// intend's own transfers (auto and resource triggers).
	Actor string `json:"actor,omitempty"`
	// Reason is why an expert forced the transfer (trigger expert).
	Reason string `json:"reason,omitempty"`
	// MigrateTo is the entity version a migration asked for (its
	// on_update transfer).
	MigrateTo int `json:"migrate_to,omitempty"`
}

// caller is what the engine knows of a request's sender: its
// Idempotency-Key (nil: none) and who it is.
type caller struct {
	idem  *lsm.IdempotentRequest
	actor string
	// migrateTo is the entity version a migration's update moves to.
	migrateTo int
}

// ApplyTransferInput writes one version of an instance.
type ApplyTransferInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	// Version is the version written: the current one plus one (1 for the
	// create).
	Version  int64
	Identity string
	State    string
	Sets     lsm.Sets
	Deleted  bool
	Event    TransferEvent
	// Errors are a failed validation's or export's errors, for the log.
	Errors  json.RawMessage
	Request *lsm.IdempotentRequest
}

// AllocateValuesInput asks for the values of the allocated attributes of
// version EntityVersion of an instance's entity, for Attributes (the
// candidate set a migration mapped to that version): the ones the
// instance holds, else new ones from their pools (docs/lsm.md,
// "Allocation"). The answer is Attributes with them.
type AllocateValuesInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	EntityVersion int
	Attributes    map[string]any
}

// ValidateInstanceInput asks whether the model compiles with the
// instance's candidate attributes among the other live instances.
type ValidateInstanceInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	Attributes    map[string]any
	// EntityVersion is the entity version Attributes are of (0: the
	// entity's latest, as before versions).
	EntityVersion int `json:",omitempty"`
}

// ValidateInstanceResult is the validation's outcome; Errors are the
// compile's errors (all of them, for the log) when it failed. ReadOnly
// are the values the model computed for the entity's r attributes, when
// it succeeded.
type ValidateInstanceResult struct {
	OK       bool
	Errors   json.RawMessage
	ReadOnly map[string]any
}

// ExportInstanceInput asks for a partial export of the instance's set.
type ExportInstanceInput struct {
	EnvironmentID   string
	Entity          string
	InstanceID      string
	InstanceVersion int64
	Mode            string
	// Attributes are the active set the resources are built from
	// (ExportResources, ExportPurged).
	Attributes map[string]any
	// EntityVersion is the entity version Attributes are of (0: the
	// entity's latest, as before versions).
	EntityVersion int `json:",omitempty"`
}

// ExportInstanceResult is the export: the desired-state version holding
// the set's content (Changed: the activity exported it; otherwise the set
// held it already), released by the activity.
type ExportInstanceResult struct {
	Version   int64
	Changed   bool
	Resources int
	// Since is the database's time when the export was made: a failure
	// recorded before it is not this export's.
	Since time.Time
	// Failed: the resources could not be built or exported (model errors,
	// refused by the merge); Errors say why.
	Failed bool
	Errors json.RawMessage
}

// LoadInstanceInput asks for an instance as PostgreSQL holds it.
type LoadInstanceInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
}

// CheckInstanceDeployInput asks how the deploy of an instance's set goes.
type CheckInstanceDeployInput struct {
	EnvironmentID string
	Entity        string
	InstanceID    string
	Since         time.Time
}

// CheckInstanceDeployResult is DeployDone (every resource of the set is
// deployed as intended), DeployFailed (one failed since the export) or
// DeployPending.
type CheckInstanceDeployResult struct {
	Status   string
	Total    int
	Deployed int
	Failed   int
}
