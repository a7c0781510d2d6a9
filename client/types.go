package client

import (
	"encoding/json"
	"math"
	"time"
)

// The wire types: the JSON bodies of the API, field for field as the server
// writes them (docs/api.md describes each field). The server converts its
// rows to these types in one place (api/wire.go) and tests that the JSON of
// each is the JSON of the row it comes from, so they cannot drift apart.

// List is the envelope of every list response.
type List[T any] struct {
	Items []T `json:"items"`
	// Next is the cursor of the next page, absent on the last page.
	Next string `json:"next,omitempty"`
}

// Project groups environments.
type Project struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Environment is one environment: its settings, whether it is halted and
// its newest and released versions.
type Environment struct {
	ID              string    `json:"id"`
	ProjectID       string    `json:"project_id"`
	Name            string    `json:"name"`
	Description     string    `json:"description"`
	Settings        Settings  `json:"settings"`
	Halted          bool      `json:"halted"`
	LastVersion     int64     `json:"last_version"`
	ReleasedVersion *int64    `json:"released_version"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	// Protected refuses clear, decommission and delete until a global
	// admin lifts it.
	Protected bool `json:"protected"`
	// DecommissionVersion is the version a decommission under way
	// released to purge everything; while set, the environment takes no
	// other version.
	DecommissionVersion *int64 `json:"decommission_version"`
}

// Cleared counts what clearing an environment removed.
type Cleared struct {
	Versions         int64 `json:"versions"`
	Resources        int64 `json:"resources"`
	ServiceInstances int64 `json:"service_instances"`
}

// Decommission is where an environment's decommission stands (POST
// /api/v1/environments/{env}/decommission): "purging" while the version
// that purges everything deploys, "cleared" once it is done.
type Decommission struct {
	State           string   `json:"state"`
	Version         int64    `json:"version,omitempty"`
	Request         *Request `json:"deploy_request,omitempty"`
	Resources       int      `json:"resources"`
	Purged          int      `json:"purged"`
	Failed          int      `json:"failed"`
	FailedResources []string `json:"failed_resources,omitempty"`
	Deploying       bool     `json:"deploying"`
	Cleared         *Cleared `json:"cleared,omitempty"`
}

// Settings are an environment's settings (intervals in seconds; docs/api.md
// gives each one's meaning and default). A password in RepoURL comes back
// redacted.
type Settings struct {
	AutoDeploy        bool     `json:"auto_deploy"`
	AutoRelease       bool     `json:"auto_release"`
	DeployInterval    int      `json:"deploy_interval"`
	RepairInterval    int      `json:"repair_interval"`
	AutostartAgents   []string `json:"autostart_agents"`
	AgentTimeout      int      `json:"agent_timeout"`
	KeepVersions      int      `json:"keep_versions"`
	RetryAttempts     int      `json:"retry_attempts"`
	RetryBackoff      int      `json:"retry_backoff"`
	RepoURL           string   `json:"repo_url"`
	RepoBranch        string   `json:"repo_branch"`
	RecompileInterval int      `json:"recompile_interval"`
	AllowPush         bool     `json:"allow_push"`
	// CompileCPULimit is the CPU time one compile may use, in seconds;
	// only a global admin changes it.
	CompileCPULimit int `json:"compile_cpu_limit"`
	// AllowedPaths, AllowedCommands and AllowedEndpoints confine the
	// environment's resources: the path prefixes its files may be at,
	// the programs exec::Command may run (empty: no restriction), the
	// APIs and NETCONF devices rest::Object and netconf::Config may reach
	// (empty: none once any of the three is set); only a global admin
	// changes them.
	AllowedPaths     []string `json:"allowed_paths"`
	AllowedCommands  []string `json:"allowed_commands"`
	AllowedEndpoints []string `json:"allowed_endpoints"`
	// AllowedPlugins are the adapter plugins' artifacts (digests
	// "sha256:…") a confined environment's versions may require (empty:
	// none once confined); ArtifactQuota bounds the size of the
	// environment's artifacts together, in bytes. Only a global admin
	// changes them.
	AllowedPlugins []string `json:"allowed_plugins"`
	ArtifactQuota  int64    `json:"artifact_quota"`
	// InstanceQuota bounds the environment's live service instances;
	// only a global admin changes it.
	InstanceQuota int64 `json:"service_instance_quota"`
	// Retention is how long the environment keeps its history; its keys
	// are settings of their own.
	Retention
}

// Retention is how long an environment keeps what grows with its
// history, each in seconds (0: kept forever); the server prunes past it
// hourly (docs/operations.md, "Retention").
type Retention struct {
	ActionLogRetention   int `json:"action_log_retention"`
	RunRetention         int `json:"run_retention"`
	CompileRetention     int `json:"compile_retention"`
	OrderRetention       int `json:"order_retention"`
	InstanceLogRetention int `json:"instance_log_retention"`
	// NotificationRetention: resolved notifications last seen longer
	// ago go.
	NotificationRetention int `json:"notification_retention"`
}

// VersionInfo describes one exported version of an environment.
type VersionInfo struct {
	Version       int64      `json:"version"`
	CreatedAt     time.Time  `json:"created_at"`
	ReleasedAt    *time.Time `json:"released_at"`
	ResourceCount int        `json:"resource_count"`
	ChangedCount  int        `json:"changed_count"`
	ExportedBy    string     `json:"exported_by,omitempty"`
	ReleasedBy    string     `json:"released_by,omitempty"`
	// KeptInstanceResources counts the service instances' resources an
	// export carried over from the version before (docs/lsm.md).
	KeptInstanceResources int `json:"kept_instance_resources,omitempty"`
}

// Version is GET .../versions/{version}: the version and a page of its
// resources (Next is the cursor of the next page, ?after=).
type Version struct {
	VersionInfo
	// Plugins are the adapter plugins the version requires ([]: none).
	Plugins   []Plugin          `json:"plugins"`
	Resources []VersionResource `json:"resources"`
	Next      string            `json:"next,omitempty"`
}

// Plugin is an adapter plugin a version requires: the resource types it
// serves and the artifact it runs per platform (docs/api.md,
// "Artifacts").
type Plugin struct {
	Name    string   `json:"name"`
	Module  string   `json:"module,omitempty"`
	Version string   `json:"version,omitempty"`
	Runtime string   `json:"runtime"`
	Types   []string `json:"types"`
	// Artifacts maps a platform ("linux/amd64"; "any" for python3) to
	// the artifact's digest, "sha256:<64 hex>".
	Artifacts map[string]string `json:"artifacts"`
}

// Artifact is an adapter plugin's artifact stored in an environment
// (GET .../artifacts, PUT .../artifacts/{digest}).
type Artifact struct {
	Digest     string    `json:"digest"`
	Size       int64     `json:"size"`
	UploadedBy string    `json:"uploaded_by"`
	UploadedAt time.Time `json:"uploaded_at"`
	// Versions are the environment's versions that require it (in the
	// list; null in an upload's answer).
	Versions []int64 `json:"versions"`
}

// VersionResource is one resource of a version, as it was exported.
type VersionResource struct {
	ID            string          `json:"id"`
	Attributes    json.RawMessage `json:"attributes"`
	Requires      []string        `json:"requires"`
	Purged        bool            `json:"purged"`
	SendEvent     bool            `json:"send_event"`
	ReceiveEvents bool            `json:"receive_events"`
	ReportOnly    bool            `json:"report_only"`
	Undefined     bool            `json:"undefined"`
	// Unmanaged: the model left the resource alone; intend never
	// observes, changes or purges it.
	Unmanaged   bool   `json:"unmanaged"`
	ResourceSet string `json:"resource_set,omitempty"`
	Hash        string `json:"hash"`
}

// ResourceIntent is GET .../resources/{id}/intent: the resource as the
// released version holds it (before any release, the version that last
// changed it), and the resources of that version that require it
// (RequiredBy, sorted, at most 1,000).
type ResourceIntent struct {
	Version    int64           `json:"version"`
	Resource   VersionResource `json:"resource"`
	RequiredBy []string        `json:"required_by"`
}

// Release is the answer to a release: the version, how many resources it
// changes, and the deploy request it queued (nil when none was).
type Release struct {
	Version         VersionInfo `json:"version"`
	Changed         int         `json:"changed"`
	Request         *Request    `json:"deploy_request"`
	AlreadyReleased bool        `json:"already_released"`
}

// Rollback is the answer to a rollback: the release of the new version that
// copies an old one.
type Rollback struct {
	Release
	From                  int64 `json:"rolled_back_from"`
	KeptInstanceResources int   `json:"kept_instance_resources"`
}

// DeployRun is one run of the deploy workflow (a deploy, repair or
// dry-run): its status and counts.
type DeployRun struct {
	Run         int64      `json:"run"`
	Version     int64      `json:"version"`
	Action      string     `json:"action"`
	Reason      string     `json:"reason"`
	Status      string     `json:"status"`
	RequestedAt time.Time  `json:"requested_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Total       int        `json:"total"`
	Deployed    int        `json:"deployed"`
	Failed      int        `json:"failed"`
	Skipped     int        `json:"skipped"`
	Unavailable int        `json:"unavailable"`
	WorkflowID  string     `json:"workflow_id"`
	// Stages is where the run's batches spent their time, recorded when
	// the run finished (nil: still running, dispatched nothing, or a run
	// of before the field).
	Stages *RunStages `json:"stages,omitempty"`
}

// RunStages is where a finished run's batches spent their time: queued in
// the workflow (for a dispatch slot), waiting for a poller of their agent's
// task queue, executing, recording their outcomes.
type RunStages struct {
	Queued   StageStats `json:"queued"`
	PollWait StageStats `json:"poll_wait"`
	Execute  StageStats `json:"execute"`
	Record   StageStats `json:"record"`
	// MaxInFlight is the most batches the run had dispatched at once.
	MaxInFlight int `json:"max_in_flight"`
	// HistoryEvents counts the events of the run's workflow histories,
	// Segments the histories (continue-as-new starts another).
	HistoryEvents int `json:"history_events"`
	Segments      int `json:"segments"`
}

// StageBounds are the upper bounds, in seconds, of StageStats.Buckets
// (a last bucket holds what is above them).
var StageBounds = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}

// StageStats is one stage's time over a run's batches.
type StageStats struct {
	Count int     `json:"count"`
	Sum   float64 `json:"sum_seconds"`
	Max   float64 `json:"max_seconds"`
	// Buckets counts the batches per bucket of StageBounds (not
	// cumulative).
	Buckets []int `json:"buckets,omitempty"`
}

// Mean is the average time of a batch in the stage.
func (s StageStats) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / float64(s.Count)
}

// Quantile estimates the q-quantile (0 < q <= 1): the upper bound of the
// bucket that holds it, never more than Max.
func (s StageStats) Quantile(q float64) float64 {
	if s.Count == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(s.Count)))
	seen := 0
	for i, n := range s.Buckets {
		seen += n
		if seen >= rank {
			if i < len(StageBounds) {
				return min(StageBounds[i], s.Max)
			}
			break
		}
	}
	return s.Max
}

// Request is a queued deploy or repair. Run is the run that took it (nil
// while queued; 0 for an automatic request that had nothing to do).
type Request struct {
	ID          int64      `json:"id"`
	Kind        string     `json:"kind"`
	Reason      string     `json:"reason"`
	Agents      []string   `json:"agents,omitempty"`
	ResourceIDs []string   `json:"resource_ids,omitempty"`
	StaleBefore *time.Time `json:"stale_before,omitempty"`
	RequestedAt time.Time  `json:"requested_at"`
	Auto        bool       `json:"auto"`
	Run         *int64     `json:"run"`
	RequestedBy string     `json:"requested_by,omitempty"`
}

// ResourceState is where one resource stands: its intent, what was
// deployed, and whether they agree.
type ResourceState struct {
	ResourceID         string     `json:"id"`
	Type               string     `json:"type"`
	Agent              string     `json:"agent"`
	IntentVersion      *int64     `json:"intent_version"`
	IntentHash         string     `json:"intent_hash"`
	DeployedHash       string     `json:"deployed_hash"`
	LastResult         string     `json:"last_result"`
	Compliance         string     `json:"compliance"`
	Blocked            bool       `json:"blocked"`
	Orphan             bool       `json:"orphan"`
	LastAttempt        *time.Time `json:"last_attempt"`
	LastSuccess        *time.Time `json:"last_success"`
	LastProducedChange bool       `json:"last_produced_change"`
}

// Resource is GET .../resources/{id}: its state and its newest actions.
type Resource struct {
	ResourceState
	Actions []Action `json:"actions"`
}

// Action is one attempt on one resource, from the action log.
type Action struct {
	ID         int64           `json:"id"`
	ResourceID string          `json:"resource_id"`
	Version    int64           `json:"version"`
	Action     string          `json:"action"`
	Reason     string          `json:"reason"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt time.Time       `json:"finished_at"`
	Result     string          `json:"result"`
	Changes    json.RawMessage `json:"changes,omitempty"`
	Logs       json.RawMessage `json:"logs,omitempty"`
	Error      *string         `json:"error,omitempty"`
	ErrorClass *string         `json:"error_class,omitempty"`
	WorkflowID string          `json:"workflow_id"`
	RunID      string          `json:"run_id"`
	Attempt    int             `json:"attempt"`
	Executor   string          `json:"executor,omitempty"`
}

// Fact is one fact an adapter reported about a resource.
type Fact struct {
	ResourceID string          `json:"resource_id"`
	Name       string          `json:"name"`
	Value      json.RawMessage `json:"value"`
	UpdatedAt  time.Time       `json:"updated_at"`
	// Source is adapter (discovered on the target) or user (set through
	// the API; an adapter's value never replaces it).
	Source string `json:"source"`
}

// Agent is one agent of an environment with the executors that serve it.
type Agent struct {
	Name      string    `json:"name"`
	Paused    bool      `json:"paused"`
	FirstSeen time.Time `json:"first_seen"`
	// Executors serve the agent and have not stopped; a killed one stays
	// (Live false) until it is forgotten.
	Executors []AgentExecutor `json:"executors"`
}

// AgentExecutor is one executor serving an agent.
type AgentExecutor struct {
	Name     string    `json:"name"`
	Hostname string    `json:"hostname"`
	Version  string    `json:"version"`
	Embedded bool      `json:"embedded"`
	LastSeen time.Time `json:"last_seen"`
	Live     bool      `json:"live"`
}

// Executor is one executor process registered with an environment.
type Executor struct {
	Name      string     `json:"name"`
	Hostname  string     `json:"hostname"`
	PID       int        `json:"pid"`
	Version   string     `json:"version"`
	Agents    []string   `json:"agents"`
	Embedded  bool       `json:"embedded"`
	StartedAt time.Time  `json:"started_at"`
	LastSeen  time.Time  `json:"last_seen"`
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	Live      bool       `json:"live"`
	// RegisteredBy owns the registration: "token:<id>" for the API token
	// that registered it (only that token updates or stops it), or
	// "system:intend" for a server's in-process embedded executor.
	RegisteredBy string `json:"registered_by,omitempty"`
	// TaskQueue is the Temporal task queue it polls for all its agents.
	TaskQueue string `json:"task_queue,omitempty"`
}

// Token is an API token, never with its secret.
type Token struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Role         string     `json:"role"`
	Environments []string   `json:"environments"`
	Agents       []string   `json:"agents,omitempty"`
	Hint         string     `json:"hint"`
	CreatedBy    string     `json:"created_by"`
	CreatedAt    time.Time  `json:"created_at"`
	ExpiresAt    *time.Time `json:"expires_at"`
	LastUsedAt   *time.Time `json:"last_used_at"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
}

// CreatedToken is the answer to a token's creation: the only time its
// secret is shown.
type CreatedToken struct {
	Token
	Secret string `json:"token"`
}

// Whoami is who the caller is, as GET /api/v1/whoami tells it.
type Whoami struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Actor string `json:"actor"`
	// Role is the role in every environment ("none" when only some).
	Role string `json:"role"`
	// Environments are the names of the environments the caller sees,
	// with its role in each.
	Environments map[string]string `json:"environments"`
}

// AuditEntry is one entry of the audit log.
type AuditEntry struct {
	ID            int64           `json:"id"`
	At            time.Time       `json:"at"`
	EnvironmentID *string         `json:"environment_id"`
	Environment   string          `json:"environment,omitempty"`
	ActorKind     string          `json:"actor_kind"`
	Actor         string          `json:"actor"`
	RemoteAddr    string          `json:"remote_addr"`
	Action        string          `json:"action"`
	Method        string          `json:"method"`
	Path          string          `json:"path"`
	Status        int             `json:"status"`
	Detail        json.RawMessage `json:"detail,omitempty"`
}

// Compile is one compile of an environment's model repository.
type Compile struct {
	ID          int64      `json:"id"`
	Status      string     `json:"status"`
	Reason      string     `json:"reason"`
	Merged      int        `json:"merged"`
	RequestedAt time.Time  `json:"requested_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Success     *bool      `json:"success"`
	RepoURL     string     `json:"repo_url"`
	Branch      string     `json:"branch"`
	Commit      string     `json:"commit,omitempty"`
	// ModelHash is the model source a compile for facts in push mode
	// compiled (RepoURL and Branch are then empty).
	ModelHash     string          `json:"model_source,omitempty"`
	Version       *int64          `json:"version"`
	Exported      *bool           `json:"exported,omitempty"`
	Released      *bool           `json:"released,omitempty"`
	ResourceCount *int            `json:"resource_count,omitempty"`
	Errors        json.RawMessage `json:"errors,omitempty"`
	WorkflowID    string          `json:"workflow_id"`
}

// Dryrun is GET .../dryruns/{id}: the dry-run's run and a page of its
// results (Next is the cursor of the next page, ?after=).
type Dryrun struct {
	DeployRun
	Results []DryrunResult `json:"results"`
	Next    string         `json:"next,omitempty"`
}

// DryrunResult is what a dry-run found for one resource.
type DryrunResult struct {
	ResourceID string          `json:"id"`
	Status     string          `json:"status"`
	Changes    json.RawMessage `json:"changes,omitempty"`
	Error      *string         `json:"error,omitempty"`
}

// InstanceDryrun is the desired-state diff of a service instance's update
// and, when asked for, the dry-run of its resources.
type InstanceDryrun struct {
	BaseVersion int64              `json:"base_version"`
	Added       []string           `json:"added"`
	Removed     []string           `json:"removed"`
	Modified    []ModifiedResource `json:"modified"`
	Unchanged   []string           `json:"unchanged"`
	Run         *DeployRun         `json:"dryrun,omitempty"`
}

// ModifiedResource is a resource whose attributes differ between two
// versions, keyed by dict path.
type ModifiedResource struct {
	ID      string            `json:"id"`
	Changes map[string]Change `json:"changes"`
}

// Change is one attribute's value before and after.
type Change struct {
	From any `json:"from"`
	To   any `json:"to"`
}

// AttributeSets are a service instance's three attribute sets and the
// entity versions they were written against.
type AttributeSets struct {
	Candidate        map[string]any `json:"candidate_attributes"`
	Active           map[string]any `json:"active_attributes"`
	Rollback         map[string]any `json:"rollback_attributes"`
	CandidateVersion int            `json:"candidate_entity_version,omitempty"`
	ActiveVersion    int            `json:"active_entity_version,omitempty"`
	RollbackVersion  int            `json:"rollback_entity_version,omitempty"`
}

// ServiceInstance is one service instance of the inventory, as a write
// returns it and a list shows it.
type ServiceInstance struct {
	ID            string `json:"id"`
	Entity        string `json:"service_entity"`
	Identity      string `json:"identity,omitempty"`
	State         string `json:"state"`
	Version       int64  `json:"version"`
	EntityVersion int    `json:"service_entity_version"`
	AttributeSets
	// Metadata are the instance's free key/values (no transfer reads or
	// writes them); absent when it has none.
	Metadata  map[string]any `json:"metadata,omitempty"`
	Deleted   bool           `json:"deleted"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"last_updated"`
}

// InstanceView is GET .../service_inventory/{entity}/{id}: the instance,
// its resources' deploy progress and the live instances that reference it.
type InstanceView struct {
	ServiceInstance
	Deployment   Deployment         `json:"deployment"`
	ReferencedBy []InstanceReferrer `json:"referenced_by"`
}

// Deployment counts an instance's resources in the newest version: how
// many there are, how many are deployed as intended, and how many failed
// (their deploy run over).
type Deployment struct {
	Total    int `json:"total"`
	Deployed int `json:"deployed"`
	Failed   int `json:"failed"`
}

// InstanceReferrer is a live instance whose attribute references another
// one.
type InstanceReferrer struct {
	ServiceEntity string `json:"service_entity"`
	ID            string `json:"id"`
	Identity      string `json:"identity,omitempty"`
	// Attribute is the referrer's attribute that names the instance.
	Attribute string `json:"attribute"`
	State     string `json:"state"`
}

// InstanceLogEntry is one version of a service instance's log.
type InstanceLogEntry struct {
	Version int64  `json:"version"`
	State   string `json:"state"`
	AttributeSets
	Event     json.RawMessage `json:"event"`
	Errors    json.RawMessage `json:"errors,omitempty"`
	CreatedAt time.Time       `json:"timestamp"`
}

// TransferEvent is the data of one transfer event of GET .../events: a
// version of the instance's log, flattened with what caused it.
type TransferEvent struct {
	InstanceID string `json:"id"`
	Version    int64  `json:"version"`
	// Source is the state the transfer left ("" for the create); Target
	// the state it went to (the instance's state at this version).
	Source     string          `json:"source,omitempty"`
	Target     string          `json:"target"`
	Trigger    string          `json:"trigger"`
	Error      bool            `json:"error"`
	Operations json.RawMessage `json:"operations"`
	// Actor is who asked for it (absent for the engine's own transfers);
	// Request its Idempotency-Key; Reason an expert transfer's reason.
	Actor   string `json:"actor,omitempty"`
	Request string `json:"request,omitempty"`
	Reason  string `json:"reason,omitempty"`
	AttributeSets
	// Errors are a failed validation's compile errors.
	Errors json.RawMessage `json:"errors,omitempty"`
	// Terminal: the instance is gone; the stream ends after this event.
	Terminal  bool      `json:"terminal"`
	Timestamp time.Time `json:"timestamp"`
	// Deployment is the deploy progress of the instance's resources, on
	// the newest event a stream sends at a time (not on the ones it
	// catches up with).
	Deployment *Deployment `json:"deployment,omitempty"`
}

// Order is a batch of service-instance operations run as one.
type Order struct {
	ID          string         `json:"id"`
	Policy      string         `json:"policy"`
	Status      string         `json:"status"`
	RequestedBy string         `json:"requested_by,omitempty"`
	ItemCount   int            `json:"item_count"`
	Counts      map[string]int `json:"counts"`
	CreatedAt   time.Time      `json:"created_at"`
	StartedAt   *time.Time     `json:"started_at,omitempty"`
	FinishedAt  *time.Time     `json:"finished_at,omitempty"`
	Items       []OrderItem    `json:"items,omitempty"`
}

// OrderItem is one operation of an order.
type OrderItem struct {
	ID            string          `json:"id"`
	Position      int             `json:"position"`
	Operation     string          `json:"operation"`
	Entity        string          `json:"service_entity"`
	InstanceID    string          `json:"instance_id"`
	DependsOn     []string        `json:"depends_on"`
	Status        string          `json:"status"`
	VersionBefore *int64          `json:"version_before,omitempty"`
	Version       *int64          `json:"version,omitempty"`
	State         string          `json:"state,omitempty"`
	Error         string          `json:"error,omitempty"`
	StartedAt     *time.Time      `json:"started_at,omitempty"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	Request       json.RawMessage `json:"request"`
}

// EntityDefinition is a service entity as a model declares it: its
// attributes and lifecycle (docs/lsm.md).
type EntityDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Identity    string          `json:"identity,omitempty"`
	Attributes  []AttributeSpec `json:"attributes"`
	Lifecycle   Lifecycle       `json:"lifecycle"`
	Version     int             `json:"version,omitempty"`
}

// AttributeSpec is one attribute of a service entity.
type AttributeSpec struct {
	Name        string          `json:"name"`
	Modifier    string          `json:"modifier"`
	Description string          `json:"description,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Required    bool            `json:"required"`
	References  string          `json:"references,omitempty"`
	// Embedded: the attribute holds an embedded entity, or a list of
	// them, with attributes of their own (docs/lsm.md).
	Embedded *EmbeddedSpec `json:"embedded,omitempty"`
	// Allocate names the pool the server allocates the value from
	// (@lsm(r, allocate=vlan)).
	Allocate string `json:"allocate,omitempty"`
}

// EmbeddedSpec is the entity an embedded attribute holds.
type EmbeddedSpec struct {
	Attributes []AttributeSpec `json:"attributes"`
	// List: a list of such entities, each identified by Key.
	List bool     `json:"list,omitempty"`
	Key  []string `json:"key,omitempty"`
}

// Lifecycle is the state machine a service entity's instances follow.
type Lifecycle struct {
	Name      string                    `json:"name"`
	Start     string                    `json:"start"`
	States    map[string]LifecycleState `json:"states"`
	Transfers []Transfer                `json:"transfers"`
	// InitialStates are the states other than Start a create may name
	// as its initial_state.
	InitialStates []string `json:"initial_states,omitempty"`
}

// LifecycleState is one state of a lifecycle.
type LifecycleState struct {
	Name        string `json:"name"`
	ModelState  string `json:"model_state"`
	Export      bool   `json:"export"`
	Purge       bool   `json:"purge"`
	Terminal    bool   `json:"terminal"`
	Description string `json:"description,omitempty"`
}

// Transfer is one transfer of a lifecycle.
type Transfer struct {
	Source          string   `json:"source"`
	Target          string   `json:"target"`
	Error           string   `json:"error,omitempty"`
	Trigger         string   `json:"trigger"`
	Validate        bool     `json:"validate"`
	TargetOperation []string `json:"target_operation,omitempty"`
	ErrorOperation  []string `json:"error_operation,omitempty"`
	Description     string   `json:"description,omitempty"`
	// ConfigName, on an auto transfer, names the switch of the entity's
	// and the instance's configs (auto_transfer_configs) that turns it
	// off and on.
	ConfigName string `json:"config_name,omitempty"`
}

// ServiceEntity is one entity of the service catalog: its newest
// definition, its instances counted by state and its config.
type ServiceEntity struct {
	EntityDefinition
	ModelHash    string         `json:"model_hash"`
	Instances    map[string]int `json:"instances"`
	RegisteredAt time.Time      `json:"registered_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	Config       EntityConfig   `json:"config"`
}

// EntityConfig is a service entity's config.
type EntityConfig struct {
	AutoTransfers bool `json:"auto_transfers"`
	// AutoTransferConfigs switches the auto transfers of each config name
	// (a name it lacks is on).
	AutoTransferConfigs map[string]bool `json:"auto_transfer_configs,omitempty"`
}

// InstanceConfig is a service instance's own config over its entity's,
// and the switches that result (GET
// /lsm/v1/service_inventory/{entity}/{id}/config).
type InstanceConfig struct {
	ID     string `json:"id"`
	Entity string `json:"service_entity"`
	// AutoTransfers false holds every auto transfer of the instance.
	AutoTransfers bool `json:"auto_transfers"`
	// AutoTransferConfigs overrides the entity's entry of each name.
	AutoTransferConfigs map[string]bool     `json:"auto_transfer_configs,omitempty"`
	Effective           EffectiveAutoConfig `json:"effective"`
}

// EffectiveAutoConfig is what the engine does with an instance's auto
// transfers: AutoTransfers, the entity's and the instance's wide
// switches together; AutoTransferConfigs, for each config name of the
// entity's lifecycle, whether the engine takes its auto transfers.
type EffectiveAutoConfig struct {
	AutoTransfers       bool            `json:"auto_transfers"`
	AutoTransferConfigs map[string]bool `json:"auto_transfer_configs"`
}

// EntityVersionInfo is one version of a service entity the catalog keeps.
type EntityVersionInfo struct {
	EntityDefinition
	ModelHash    string         `json:"model_hash"`
	RegisteredAt time.Time      `json:"registered_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	Latest       bool           `json:"latest"`
	Instances    map[string]int `json:"instances"`
}

// CatalogEntity is GET /lsm/v1/service_catalog/{entity}: the newest
// definition at the top level and every version the catalog keeps.
type CatalogEntity struct {
	ServiceEntity
	LatestVersion int                 `json:"latest_version"`
	Versions      []EntityVersionInfo `json:"versions"`
}

// Callback is a registered LSM callback (never with its secret).
type Callback struct {
	ID            string        `json:"id"`
	EnvironmentID string        `json:"environment"`
	ServiceEntity string        `json:"service_entity,omitempty"`
	URL           string        `json:"url"`
	Description   string        `json:"description"`
	CreatedBy     string        `json:"created_by"`
	CreatedAt     time.Time     `json:"created_at"`
	Stats         CallbackStats `json:"deliveries"`
}

// CallbackStats counts a callback's deliveries.
type CallbackStats struct {
	Pending         int        `json:"pending"`
	Delivered       int        `json:"delivered"`
	Dead            int        `json:"dead"`
	LastDeliveredAt *time.Time `json:"last_delivered_at,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	LastErrorAt     *time.Time `json:"last_error_at,omitempty"`
	OldestPending   *time.Time `json:"oldest_pending,omitempty"`
}

// CallbackEvent is one event a callback delivers (or gave up on).
type CallbackEvent struct {
	InstanceID    string     `json:"instance_id"`
	Version       int64      `json:"version"`
	EventID       string     `json:"event_id"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	LastStatus    *int       `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

// CreatedCallback is the answer to a registration: the only time the
// secret is shown.
type CreatedCallback struct {
	Callback
	Secret string `json:"secret"`
}

// CallbackView is one callback with its newest dead events.
type CallbackView struct {
	Callback
	DeadEvents []CallbackEvent `json:"dead_events"`
}

// Pool is one of the catalog's allocation pools (GET /lsm/v1/pools),
// with how much of it live instances hold.
type Pool struct {
	Name string `json:"name"`
	// Kind is range, vlan or cidr.
	Kind string `json:"kind"`
	// From and To bound a range or vlan pool; Prefix and Size make a
	// cidr pool (the subnets of length Size of Prefix).
	From   int64  `json:"from,omitempty"`
	To     int64  `json:"to,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Size   int    `json:"size,omitempty"`
	// Values is how many values the pool has; Used how many live
	// instances hold; Free the others.
	Values int64 `json:"values"`
	Used   int64 `json:"used"`
	Free   int64 `json:"free"`
}

// PoolAllocation is a value of a pool that a live instance holds.
type PoolAllocation struct {
	// Value is a number (range, vlan) or a subnet (cidr).
	Value         any       `json:"value"`
	ServiceEntity string    `json:"service_entity"`
	InstanceID    string    `json:"instance_id"`
	Attribute     string    `json:"attribute"`
	AllocatedAt   time.Time `json:"allocated_at"`
}

// PoolView is GET /lsm/v1/pools/{pool}: the pool and a page of its
// allocations, lowest value first (Next goes back as after).
type PoolView struct {
	Pool
	Allocations []PoolAllocation `json:"allocations"`
	Next        string           `json:"next,omitempty"`
}

// Notification is one notification of an environment (GET
// .../notifications): a compile that failed, a run that finished with
// failed resources, an agent without a live executor. One condition is
// one notification; its occurrences count the times it happened again
// while unresolved.
type Notification struct {
	ID string `json:"id"`
	// Kind is compile_failed, run_failed or agent_without_executor.
	Kind string `json:"kind"`
	// Severity is error or warning.
	Severity string `json:"severity"`
	Title    string `json:"title"`
	Message  string `json:"message"`
	// Compile, Run and Agent name what it is about (the newest
	// occurrence's compile or run).
	Compile     *int64     `json:"compile,omitempty"`
	Run         *int64     `json:"run,omitempty"`
	Agent       string     `json:"agent,omitempty"`
	Occurrences int        `json:"occurrences"`
	CreatedAt   time.Time  `json:"created_at"`
	LastSeenAt  time.Time  `json:"last_seen_at"`
	ResolvedAt  *time.Time `json:"resolved_at,omitempty"`
	ReadAt      *time.Time `json:"read_at,omitempty"`
	ClearedAt   *time.Time `json:"cleared_at,omitempty"`
}

// NotificationMarks is the body of PATCH .../notifications/{id}: a mark
// to set (true) or take off (false); absent leaves it.
type NotificationMarks struct {
	Read    *bool `json:"read,omitempty"`
	Cleared *bool `json:"cleared,omitempty"`
}

// NotificationWebhook is the body of PUT .../notifications/webhook.
type NotificationWebhook struct {
	URL string `json:"url"`
}

// ModelSource is an environment's model source: a project archive uploaded
// with PUT .../model (docs/lsm.md).
type ModelSource struct {
	Hash       string    `json:"hash"`
	Files      int       `json:"files"`
	Size       int       `json:"size"`
	Origin     string    `json:"origin"`
	UploadedAt time.Time `json:"uploaded_at"`
	// AnnouncedAt is when the live service instances were told of it (nil
	// until they were).
	AnnouncedAt *time.Time `json:"announced_at"`
}

// VersionDiff is GET .../versions/{a}/diff/{b}: the resources added,
// removed and modified between two versions (Next is the cursor of the
// next page, ?after=).
type VersionDiff struct {
	From     int64              `json:"from"`
	To       int64              `json:"to"`
	Added    []string           `json:"added"`
	Removed  []string           `json:"removed"`
	Modified []ModifiedResource `json:"modified"`
	Next     string             `json:"next,omitempty"`
}

// InstanceDryrunReport is the answer of POST
// /lsm/v1/service_inventory/{entity}/{id}/dryrun: the update as it would
// be taken, its validation, the desired-state diff and the dry-run on the
// targets.
type InstanceDryrunReport struct {
	ServiceEntity string `json:"service_entity"`
	ID            string `json:"id"`
	Version       int64  `json:"version"`
	State         string `json:"state"`
	// Operation is the write dry-run: create, update, delete, set_state
	// or rollback.
	Operation string `json:"operation,omitempty"`
	// Transfer is the lifecycle's transfer the write would take (nil when
	// the state takes none: an update with UpdateAllowed false);
	// ResultingState the state it would lead to (its error state when
	// the validation it runs fails), and ExportMode what that state does
	// with the instance's resources: export, purge (removed from the
	// targets), remove (the set leaves the model) or none.
	Transfer       *DryrunTransfer `json:"transfer,omitempty"`
	ResultingState string          `json:"resulting_state,omitempty"`
	ExportMode     string          `json:"export_mode,omitempty"`
	// UpdateAllowed says whether the instance's state takes an update
	// now; Allowed lists what it takes when it does not.
	UpdateAllowed bool     `json:"update_allowed"`
	Allowed       []string `json:"allowed,omitempty"`
	// CandidateAttributes is the candidate set the update would write,
	// with the r attributes the validation computed.
	CandidateAttributes map[string]any   `json:"candidate_attributes"`
	Validation          DryrunValidation `json:"validation"`
	// RenderErrors: the validation passed but the export would fail.
	RenderErrors json.RawMessage `json:"render_errors,omitempty"`
	// DesiredState is the per-resource, per-attribute diff against the
	// set in the released version (validation passed only).
	DesiredState *InstanceDryrun `json:"desired_state,omitempty"`
	// Dryrun is the dry-run on the targets; DryrunURL where its results
	// are read; Targets its results when ?wait= saw it finish.
	Dryrun    *DeployRun     `json:"dryrun,omitempty"`
	DryrunURL string         `json:"dryrun_url,omitempty"`
	Targets   []DryrunResult `json:"targets,omitempty"`
	// Allocated are the values a create's dry-run shows for the
	// attributes the server allocates from pools (in
	// CandidateAttributes too): the lowest free ones now, taken by
	// nothing, so provisional.
	Allocated []DryrunAllocation `json:"allocated,omitempty"`
}

// DryrunAllocation is a value a create would be given from a pool, as
// its dry-run shows it.
type DryrunAllocation struct {
	Attribute string `json:"attribute"`
	Pool      string `json:"pool"`
	Value     any    `json:"value"`
	// Detail says the value is provisional: another create may take it
	// first.
	Detail string `json:"detail"`
}

// DryrunTransfer is the transfer a dry-run's write would take.
type DryrunTransfer struct {
	Trigger string `json:"trigger"`
	Source  string `json:"source,omitempty"`
	Target  string `json:"target"`
	// ErrorState is where it goes when its validation (or deploy) fails.
	ErrorState string `json:"error_state,omitempty"`
	// Validates: the transfer validates the instance's current set first.
	Validates bool `json:"validates"`
	// Operations are applied to the attribute sets on its way to Target.
	Operations []string `json:"operations,omitempty"`
}

// DryrunValidation is the verdict of an instance dry-run's validation:
// OK, or the compile's errors.
type DryrunValidation struct {
	OK     bool            `json:"ok"`
	Errors json.RawMessage `json:"errors,omitempty"`
}

// Diagnosis is GET .../service_inventory/{entity}/{id}/diagnose: why an
// instance was rejected or failed.
type Diagnosis struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Version int64  `json:"version"`
	// Validation is the newest failed validation: the version it made
	// and the compile errors.
	Validation *FailedValidation `json:"validation,omitempty"`
	// Resources are the instance's resources that are not deployed as
	// intended, each with its last failed attempt's error and log lines.
	Resources []ResourceDiagnosis `json:"resources"`
}

// FailedValidation is a version of an instance whose validation failed.
type FailedValidation struct {
	Version int64           `json:"version"`
	Errors  json.RawMessage `json:"errors"`
}

// ResourceDiagnosis is a resource of an instance that is not deployed as
// intended, with its last failed attempt.
type ResourceDiagnosis struct {
	ResourceState
	Error *string         `json:"error,omitempty"`
	Logs  json.RawMessage `json:"logs,omitempty"`
}

// ModelPreview is POST /api/v1/environments/{env}/lsm/preview: what a
// model (the project archive sent) would do to the live service
// instances whose state exports resources, one page of them, changing
// nothing (docs/lsm.md, "Preview of a model change").
type ModelPreview struct {
	// Model is the SHA-256 of the archive previewed.
	Model string `json:"model"`
	// BaseVersion is the version each instance's set is compared with:
	// the released one (the newest when none is released).
	BaseVersion int64 `json:"base_version"`
	// Instances are the page's instances, by entity and id.
	Instances []InstancePreview `json:"instances"`
	// Counts are the page's instances by status.
	Counts map[string]int `json:"counts"`
	// Skipped counts the live instances of the page's range whose state
	// exports nothing (start, acknowledged, rejected in lsm.simple): the
	// new model reaches them at their next validation.
	Skipped int `json:"skipped"`
	// Next, when more instances follow, is the cursor of the next page
	// (?after=).
	Next string `json:"next,omitempty"`
}

// InstancePreview is what a model would do to one service instance's
// resources: Status unchanged, changed (Added, Removed, Modified with the
// per-attribute changes) or failed (the new model refuses the instance's
// attributes, or the export would fail: Errors, the compile's).
type InstancePreview struct {
	ServiceEntity string `json:"service_entity"`
	ID            string `json:"id"`
	Identity      string `json:"identity,omitempty"`
	State         string `json:"state"`
	// EntityVersion is the version of the entity its active set is of.
	EntityVersion int                `json:"service_entity_version"`
	Status        string             `json:"status"`
	Errors        json.RawMessage    `json:"errors,omitempty"`
	Added         []string           `json:"added,omitempty"`
	Removed       []string           `json:"removed,omitempty"`
	Modified      []ModifiedResource `json:"modified,omitempty"`
	Unchanged     int                `json:"unchanged"`
}

// The statuses of an InstancePreview.
const (
	PreviewUnchanged = "unchanged"
	PreviewChanged   = "changed"
	PreviewFailed    = "failed"
)
