package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/intendhq/intend/internal/lsm"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/confine"
)

// Project groups environments.
type Project struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Environment is one tenant: its own versions, resources and settings.
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
	// admin lifts it (housekeeping.go).
	Protected bool `json:"protected"`
	// DecommissionVersion is the version a decommission under way
	// released to purge everything (nil: none); while it is set the
	// environment takes no other version.
	DecommissionVersion *int64 `json:"decommission_version"`
}

// LSM is what the lifecycle's writes need of the environment.
func (e Environment) LSM() lsm.Env { return lsm.Env{ID: e.ID, Name: e.Name} }

// Settings are an environment's typed settings. Stored as JSON holding
// only the keys that were set; absent keys read as their default.
type Settings struct {
	// AutoDeploy starts a deploy when a version is released.
	AutoDeploy bool `json:"auto_deploy"`
	// AutoRelease releases a pushed version (intend export, PUT
	// .../versions) as it is stored, as export -d would; off (the
	// default), a pushed version waits for a release. A dry-run's
	// version is never released. A halted environment holds the release
	// until it is resumed.
	AutoRelease bool `json:"auto_release"`
	// DeployInterval is the retry period for non-compliant resources, in
	// seconds; 0 turns periodic retry off.
	DeployInterval int `json:"deploy_interval"`
	// RepairInterval is the self-healing period, in seconds; 0 turns it off.
	RepairInterval int `json:"repair_interval"`
	// AutostartAgents lists the agents the server's embedded executor serves
	// ("*" = every agent). Other agents need an `intend executor`.
	AutostartAgents []string `json:"autostart_agents"`
	// AgentTimeout is how long, in seconds, a batch waits for an executor
	// of its agent before its resources are recorded unavailable.
	AgentTimeout int `json:"agent_timeout"`
	// KeepVersions is how many versions an environment keeps (0 = all);
	// older ones are deleted after each export, never the released one.
	KeepVersions int `json:"keep_versions"`
	// RetryAttempts is how many times a deploy run tries a resource that
	// failed with a transient or throttled error again before moving on
	// (0 = never; the deploy_interval timer still retries it later).
	RetryAttempts int `json:"retry_attempts"`
	// RetryBackoff is the wait, in seconds, before the first of those
	// retries, doubled for each next one.
	RetryBackoff int `json:"retry_backoff"`
	// RepoURL is the git repository the server compiles the environment's
	// model from (autonomous mode): an https, ssh or git URL, scp-like
	// user@host:path, or (on a server that allows them) a local path or
	// file:// URL; never credentials (CheckRepoURL); "" for none.
	RepoURL string `json:"repo_url"`
	// RepoBranch is the branch of RepoURL that is compiled.
	RepoBranch string `json:"repo_branch"`
	// RecompileInterval is how often, in seconds, the server compiles the
	// branch on its own (0 = only when asked).
	RecompileInterval int `json:"recompile_interval"`
	// AllowPush lets an environment with a RepoURL also take versions and
	// models pushed over the API (intend export, intend deploy); without
	// it, such an environment takes only what the server compiles from
	// git, as seed 002's autonomous mode has it.
	AllowPush bool `json:"allow_push"`
	// CompileCPULimit is the CPU time, in seconds, one compile of the
	// environment's may use (an upload's, an autonomous compile's, a
	// service instance's validation or export): the compile workers are
	// shared by every environment. Only a global admin changes it
	// (GlobalAdminSettings).
	CompileCPULimit int `json:"compile_cpu_limit"`
	// AllowedPaths are the path prefixes (absolute, clean) the files of
	// the environment's built-in resources may be at (fs::, ssh::, a
	// symlink's target, exec::Command's cwd and creates); empty: any.
	// AllowedCommands are the programs (absolute paths) exec::Command may
	// run; empty: any. AllowedEndpoints are the APIs (URL prefixes) and
	// NETCONF devices (netconf://host[:port]) rest::Object and
	// netconf::Config may reach; empty: none once either of the other two
	// or it is set, any otherwise. Only a global admin changes them
	// (GlobalAdminSettings); Confinement reads them.
	AllowedPaths     []string `json:"allowed_paths"`
	AllowedCommands  []string `json:"allowed_commands"`
	AllowedEndpoints []string `json:"allowed_endpoints"`
	// AllowedPlugins are the artifacts (digests "sha256:…") of the
	// adapter plugins a confined environment's versions may require;
	// empty: none once confined, any otherwise. Only a global admin
	// changes it; Confinement reads it.
	AllowedPlugins []string `json:"allowed_plugins"`
	// ArtifactQuota bounds the size of the environment's plugin
	// artifacts together, in bytes (0, as rows stored before it read:
	// DefaultArtifactQuota). Only a global admin changes it.
	ArtifactQuota int64 `json:"artifact_quota"`
	// InstanceQuota bounds the environment's live service instances (0,
	// as rows stored before it read: DefaultInstanceQuota): each is a
	// workflow in the shared Temporal cluster and rows in the shared
	// database. Only a global admin changes it.
	InstanceQuota int64 `json:"service_instance_quota"`
	// Retention says how long the environment keeps its history
	// (retention.go); its keys are settings of their own.
	Retention
}

// DefaultSettings are the settings of a new environment.
func DefaultSettings() Settings {
	return Settings{AutoDeploy: true, DeployInterval: 600, RepairInterval: 86400, AutostartAgents: []string{"*"},
		AgentTimeout: 600, KeepVersions: 100, RetryAttempts: 2, RetryBackoff: 5, RepoBranch: "main",
		CompileCPULimit: DefaultCompileCPULimit, AllowedPaths: []string{}, AllowedCommands: []string{},
		AllowedEndpoints: []string{}, AllowedPlugins: []string{}, ArtifactQuota: DefaultArtifactQuota,
		InstanceQuota: DefaultInstanceQuota, Retention: DefaultRetention()}
}

// DefaultCompileCPULimit is compile_cpu_limit unless set, in seconds: the
// largest compile measured (10,000 service instances evaluated without a
// cache) uses 8-10 s of CPU on two cores; 1,000 instances (P8) 0.75 s; the
// examples under 20 ms. MaxCompileCPULimit is the largest a global admin
// may set (the server's --compile-timeout still bounds the wall clock).
const (
	DefaultCompileCPULimit = 30
	MaxCompileCPULimit     = 3600
)

// GlobalAdminSettings are the settings only a global admin may change:
// they bound what the environment takes from what all environments share
// (the server's compile workers and embedded executors, the executor's
// host). An environment admin's patch may carry them unchanged (a form
// that sends every setting), not with another value (api: 403).
// GlobalAdminChanges says which a patch changes. autostart_agents is one:
// it decides which of the environment's agents run in the server's
// embedded executors, a shared pool of processes; allowed_paths,
// allowed_commands and allowed_endpoints confine what the environment's
// resources touch there.
var GlobalAdminSettings = []string{"autostart_agents", "compile_cpu_limit", "allowed_paths", "allowed_commands",
	"allowed_endpoints", "allowed_plugins", "artifact_quota", "service_instance_quota"}

// GlobalAdminChanges returns the GlobalAdminSettings whose values differ
// between before and after, in order.
func GlobalAdminChanges(before, after Settings) []string {
	var changed []string
	for _, k := range GlobalAdminSettings {
		switch k {
		case "autostart_agents":
			if !slices.Equal(before.AutostartAgents, after.AutostartAgents) {
				changed = append(changed, k)
			}
		case "compile_cpu_limit":
			if before.CompileCPULimit != after.CompileCPULimit {
				changed = append(changed, k)
			}
		case "allowed_paths":
			if !slices.Equal(before.AllowedPaths, after.AllowedPaths) {
				changed = append(changed, k)
			}
		case "allowed_commands":
			if !slices.Equal(before.AllowedCommands, after.AllowedCommands) {
				changed = append(changed, k)
			}
		case "allowed_endpoints":
			if !slices.Equal(before.AllowedEndpoints, after.AllowedEndpoints) {
				changed = append(changed, k)
			}
		case "allowed_plugins":
			if !slices.Equal(before.AllowedPlugins, after.AllowedPlugins) {
				changed = append(changed, k)
			}
		case "artifact_quota":
			if before.Quota() != after.Quota() {
				changed = append(changed, k)
			}
		case "service_instance_quota":
			if before.Instances() != after.Instances() {
				changed = append(changed, k)
			}
		}
	}
	return changed
}

// MaxAllowedEntries bounds allowed_paths, allowed_commands and
// allowed_endpoints.
const MaxAllowedEntries = 100

// Confinement is what allowed_paths, allowed_commands and
// allowed_endpoints allow the environment's resources (internal/confine).
func (s Settings) Confinement() confine.Rules {
	return confine.Rules{Paths: s.AllowedPaths, Commands: s.AllowedCommands, Endpoints: s.AllowedEndpoints,
		Plugins: s.AllowedPlugins}
}

// Quota is artifact_quota, DefaultArtifactQuota when unset.
func (s Settings) Quota() int64 {
	if s.ArtifactQuota <= 0 {
		return DefaultArtifactQuota
	}
	return s.ArtifactQuota
}

// MaxArtifactQuota is the largest artifact_quota a global admin may set.
const MaxArtifactQuota = 1 << 40

// DefaultInstanceQuota is service_instance_quota unless set: ten times
// the largest inventory measured (P8, 10,000 instances); with metadata
// at its 16 KiB per instance, 1.6 GiB. MaxInstanceQuota is the largest a
// global admin may set.
const (
	DefaultInstanceQuota = 100_000
	MaxInstanceQuota     = 10_000_000
)

// Instances is service_instance_quota, DefaultInstanceQuota when unset.
func (s Settings) Instances() int64 {
	if s.InstanceQuota <= 0 {
		return DefaultInstanceQuota
	}
	return s.InstanceQuota
}

// CompileCPU is compile_cpu_limit as a duration (the default when a row
// stored before the setting existed reads 0).
func (s Settings) CompileCPU() time.Duration {
	if s.CompileCPULimit <= 0 {
		return DefaultCompileCPULimit * time.Second
	}
	return time.Duration(s.CompileCPULimit) * time.Second
}

// The largest values of the settings that are durations or counts: a
// period longer than a year is a mistake (and 18446744074 seconds would
// overflow a time.Duration into a 290 ms loop).
const (
	MaxInterval     = 366 * 24 * 3600
	MaxAgentTimeout = 7 * 24 * 3600
	MaxKeepVersions = 1_000_000
)

const intervalRule = "must be a whole number of seconds from 0 (off) to 31622400 (a year)"

// SettingError names one invalid setting.
type SettingError struct {
	Key    string
	Reason string
}

func (e *SettingError) Error() string { return fmt.Sprintf("setting %q: %s", e.Key, e.Reason) }

// ApplySettings merges a patch of raw JSON values over s, validating every
// key and value. Unknown keys are refused.
func ApplySettings(s Settings, patch map[string]json.RawMessage) (Settings, []*SettingError) {
	var errs []*SettingError
	keys := make([]string, 0, len(patch))
	for k := range patch {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := patch[k]
		bad := func(reason string) { errs = append(errs, &SettingError{Key: k, Reason: reason}) }
		switch k {
		case "auto_deploy":
			if json.Unmarshal(raw, &s.AutoDeploy) != nil {
				bad("must be a boolean")
			}
		case "auto_release":
			if json.Unmarshal(raw, &s.AutoRelease) != nil {
				bad("must be a boolean")
			}
		case "allow_push":
			if json.Unmarshal(raw, &s.AllowPush) != nil {
				bad("must be a boolean")
			}
		case "deploy_interval", "repair_interval":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 0 || n > MaxInterval {
				bad(intervalRule)
				continue
			}
			if k == "deploy_interval" {
				s.DeployInterval = n
			} else {
				s.RepairInterval = n
			}
		case "retry_attempts":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 0 || n > 10 {
				bad("must be a whole number from 0 (no retry within a run) to 10")
				continue
			}
			s.RetryAttempts = n
		case "retry_backoff":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 1 || n > 3600 {
				bad("must be a whole number of seconds from 1 to 3600")
				continue
			}
			s.RetryBackoff = n
		case "keep_versions":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 0 || n > MaxKeepVersions {
				bad("must be a whole number of versions from 0 (keep all) to " + strconv.Itoa(MaxKeepVersions))
				continue
			}
			s.KeepVersions = n
		case "agent_timeout":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 1 || n > MaxAgentTimeout {
				bad("must be a whole number of seconds from 1 to " + strconv.Itoa(MaxAgentTimeout) + " (a week)")
				continue
			}
			s.AgentTimeout = n
		case "repo_url":
			var u string
			if json.Unmarshal(raw, &u) != nil || strings.HasPrefix(u, "-") || strings.ContainsAny(u, "\x00\n\r") ||
				len(u) > 2048 {
				bad("must be a git repository URL or path (at most 2048 characters, not starting with '-'), or \"\" for none")
				continue
			}
			// Whether the server fetches from its own disk is its flag's
			// to say (the API checks CheckRepoURL with it); the rest
			// holds on every server.
			if err := CheckRepoURL(u, true); err != nil {
				bad(err.Error())
				continue
			}
			s.RepoURL = u
		case "repo_branch":
			var b string
			if json.Unmarshal(raw, &b) != nil || !validBranch(b) {
				bad("must be a branch name (letters, digits, '.', '_', '-' and '/', not starting with '-' or '/', no '..')")
				continue
			}
			s.RepoBranch = b
		case "recompile_interval":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 0 || n > MaxInterval {
				bad(intervalRule)
				continue
			}
			s.RecompileInterval = n
		case "compile_cpu_limit":
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 1 || n > MaxCompileCPULimit {
				bad("must be a whole number of seconds from 1 to " + strconv.Itoa(MaxCompileCPULimit) + " (an hour)")
				continue
			}
			s.CompileCPULimit = n
		case "allowed_paths", "allowed_commands":
			var a []string
			if json.Unmarshal(raw, &a) != nil || len(a) > MaxAllowedEntries {
				bad("must be a list of at most " + strconv.Itoa(MaxAllowedEntries) + " absolute paths ([] for no restriction)")
				continue
			}
			var reasons []string
			for _, p := range a {
				if err := confine.CheckEntry(p); err != nil {
					reasons = append(reasons, err.Error())
				}
			}
			if len(reasons) > 0 {
				bad("every entry must be a clean absolute path: " + strings.Join(reasons, "; "))
				continue
			}
			if a == nil {
				a = []string{}
			}
			if k == "allowed_paths" {
				s.AllowedPaths = a
			} else {
				s.AllowedCommands = a
			}
		case "allowed_endpoints":
			var a []string
			if json.Unmarshal(raw, &a) != nil || len(a) > MaxAllowedEntries {
				bad("must be a list of at most " + strconv.Itoa(MaxAllowedEntries) + " endpoints: URL prefixes " +
					"(https://host[:port][/path]) and netconf://host[:port] ([]: none once the environment is confined)")
				continue
			}
			var reasons []string
			for _, e := range a {
				if err := confine.CheckEndpointEntry(e); err != nil {
					reasons = append(reasons, err.Error())
				}
			}
			if len(reasons) > 0 {
				bad("every entry must be an endpoint, an http:// or https:// URL prefix or netconf://host[:port], " +
					"without user, query, fragment or dot segment: " + strings.Join(reasons, "; "))
				continue
			}
			if a == nil {
				a = []string{}
			}
			s.AllowedEndpoints = a
		case "allowed_plugins":
			var a []string
			if json.Unmarshal(raw, &a) != nil || len(a) > MaxAllowedEntries {
				bad("must be a list of at most " + strconv.Itoa(MaxAllowedEntries) + " artifact digests, sha256:<64 lowercase hex> " +
					"([]: no plugin once the environment is confined)")
				continue
			}
			var wrong []string
			for _, d := range a {
				if !ValidDigest(d) {
					wrong = append(wrong, fmt.Sprintf("%.80q", d))
				}
			}
			if len(wrong) > 0 {
				bad("every entry must be an artifact digest, sha256:<64 lowercase hex>: " + strings.Join(wrong, ", ") + " is not")
				continue
			}
			if a == nil {
				a = []string{}
			}
			s.AllowedPlugins = a
		case "artifact_quota":
			var n int64
			if json.Unmarshal(raw, &n) != nil || n < 1 || n > MaxArtifactQuota {
				bad("must be a whole number of bytes from 1 to " + strconv.FormatInt(MaxArtifactQuota, 10) + " (1 TiB)")
				continue
			}
			s.ArtifactQuota = n
		case "service_instance_quota":
			var n int64
			if json.Unmarshal(raw, &n) != nil || n < 1 || n > MaxInstanceQuota {
				bad("must be a whole number of live service instances from 1 to " + strconv.FormatInt(MaxInstanceQuota, 10))
				continue
			}
			s.InstanceQuota = n
		case "autostart_agents":
			var a []string
			if json.Unmarshal(raw, &a) != nil {
				bad("must be a list of agent names")
				continue
			}
			s.AutostartAgents = a
		default:
			if known, reason := s.Retention.apply(k, raw); known {
				if reason != "" {
					bad(reason)
				}
				continue
			}
			bad("unknown setting (known: action_log_retention, agent_timeout, allow_push, allowed_commands, allowed_endpoints, " +
				"allowed_paths, allowed_plugins, artifact_quota, " +
				"auto_deploy, auto_release, autostart_agents, " +
				"compile_cpu_limit, compile_retention, deploy_interval, instance_log_retention, keep_versions, " +
				"notification_retention, order_retention, " +
				"recompile_interval, repair_interval, repo_branch, repo_url, retry_attempts, retry_backoff, run_retention, " +
				"service_instance_quota)")
		}
	}
	return s, errs
}

// RefusesPush reports whether the environment compiles from git and so
// refuses versions and models pushed over the API.
func (s Settings) RefusesPush() bool { return s.RepoURL != "" && !s.AllowPush }

// ServesAgent reports whether the embedded executor serves agent.
func (s Settings) ServesAgent(agent string) bool {
	for _, a := range s.AutostartAgents {
		if a == "*" || a == agent {
			return true
		}
	}
	return false
}

var branchPattern = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._/-]{0,254}$`)

// validBranch accepts the branch names git accepts that are safe on a
// command line and in a refspec: a conservative subset of
// git-check-ref-format.
func validBranch(b string) bool {
	return branchPattern.MatchString(b) && !strings.Contains(b, "..") && !strings.Contains(b, "//") &&
		!strings.HasSuffix(b, "/") && !strings.HasSuffix(b, ".") && !strings.HasSuffix(b, ".lock") &&
		!strings.Contains(b, "/.") && !strings.Contains(b, "@{")
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)

// ValidateName checks a project or environment name: lower-case letters,
// digits, '-' and '_', 1 to 63 characters, starting and ending with a letter
// or digit. Environment names appear in workflow ids and task queues.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("name %q must be 1-63 lower-case letters, digits, '-' or '_', starting and ending with a letter or digit",
			truncateName(name))
	}
	if idPattern.MatchString(name) {
		// Paths take an id or a name: a name shaped like an id would
		// name another environment's id.
		return fmt.Errorf("name %q has the form of an id (a UUID); choose a name that is not one", name)
	}
	return nil
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// truncateName keeps an error about a long name short.
func truncateName(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// CreateProject stores a new project.
func (s *Store) CreateProject(ctx context.Context, name string) (Project, error) {
	var p Project
	err := s.pool.QueryRow(ctx,
		`insert into projects (name) values ($1) returning id::text, name, created_at`, name).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	if isUniqueViolation(err, "") {
		return p, Conflict("project %q exists already", name)
	}
	return p, err
}

// ListProjects returns all projects by name.
func (s *Store) ListProjects(ctx context.Context) ([]Project, error) {
	return s.ListProjectsPage(ctx, "", 0)
}

// ListProjectsPage returns the projects named after after (by name), at
// most limit of them (0: all).
func (s *Store) ListProjectsPage(ctx context.Context, after string, limit int) ([]Project, error) {
	rows, err := s.pool.Query(ctx, `select id::text, name, created_at from projects where name > $1 order by name
		limit nullif($2, 0)`, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Project, error) {
		var p Project
		return p, r.Scan(&p.ID, &p.Name, &p.CreatedAt)
	})
}

// GetProject finds a project by id or name.
func (s *Store) GetProject(ctx context.Context, ref string) (Project, error) {
	var p Project
	err := s.pool.QueryRow(ctx,
		`select id::text, name, created_at from projects where id::text = $1 or name = $1`, ref).
		Scan(&p.ID, &p.Name, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, NotFound("project %q", ref)
	}
	return p, err
}

const envColumns = `id::text, project_id::text, name, description, settings, halted,
	last_version, released_version, created_at, updated_at, protected, decommission_version`

// lockEnvironment reads an environment and locks its row for the rest of
// tx: what changes its queue, versions or runs goes one at a time.
func lockEnvironment(ctx context.Context, tx pgx.Tx, envID string) (Environment, error) {
	e, err := scanEnvironment(tx.QueryRow(ctx, `select `+envColumns+` from environments where id = $1::uuid for update`, envID))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, NotFound("environment %q", envID)
	}
	return e, err
}

func scanEnvironment(row pgx.Row) (Environment, error) {
	var e Environment
	var raw []byte
	if err := row.Scan(&e.ID, &e.ProjectID, &e.Name, &e.Description, &raw, &e.Halted,
		&e.LastVersion, &e.ReleasedVersion, &e.CreatedAt, &e.UpdatedAt, &e.Protected, &e.DecommissionVersion); err != nil {
		return e, err
	}
	var err error
	if e.Settings, err = decodedSettings.decode(raw); err != nil {
		return e, fmt.Errorf("environment %s: stored settings: %w", e.Name, err)
	}
	// Unconfined either way; [] is what the API shows.
	if e.Settings.AllowedPaths == nil {
		e.Settings.AllowedPaths = []string{}
	}
	if e.Settings.AllowedCommands == nil {
		e.Settings.AllowedCommands = []string{}
	}
	if e.Settings.AllowedEndpoints == nil {
		e.Settings.AllowedEndpoints = []string{}
	}
	if e.Settings.AllowedPlugins == nil {
		e.Settings.AllowedPlugins = []string{}
	}
	e.Settings.ArtifactQuota = e.Settings.Quota()
	e.Settings.InstanceQuota = e.Settings.Instances()
	return e, nil
}

// NewEnvironment is the input of CreateEnvironment.
type NewEnvironment struct {
	Project     string // id or name
	Name        string
	Description string
	Settings    map[string]json.RawMessage
}

// CreateEnvironment stores a new environment in a project.
func (s *Store) CreateEnvironment(ctx context.Context, in NewEnvironment) (Environment, error) {
	p, err := s.GetProject(ctx, in.Project)
	if err != nil {
		return Environment{}, err
	}
	set, errs := ApplySettings(DefaultSettings(), in.Settings)
	if len(errs) > 0 {
		return Environment{}, errs[0]
	}
	raw, err := json.Marshal(set)
	if err != nil {
		return Environment{}, err
	}
	e, err := scanEnvironment(s.pool.QueryRow(ctx, `
		insert into environments (project_id, name, description, settings)
		values ($1::uuid, $2, $3, $4) returning `+envColumns,
		p.ID, in.Name, in.Description, raw))
	if isUniqueViolation(err, "") {
		return e, Conflict("environment %q exists already", in.Name)
	}
	return e, err
}

// ListEnvironments returns the environments, of one project when project is
// not empty, by name.
func (s *Store) ListEnvironments(ctx context.Context, project string) ([]Environment, error) {
	return s.ListEnvironmentsPage(ctx, project, "", 0)
}

// ListEnvironmentsPage returns the environments (of project, when not
// "") named after after, by name, at most limit of them (0: all).
func (s *Store) ListEnvironmentsPage(ctx context.Context, project, after string, limit int) ([]Environment, error) {
	var projectID *string
	if project != "" {
		p, err := s.GetProject(ctx, project)
		if err != nil {
			return nil, err
		}
		projectID = &p.ID
	}
	rows, err := s.pool.Query(ctx, `select `+envColumns+` from environments
		where ($1::uuid is null or project_id = $1::uuid) and name > $2 order by name limit nullif($3, 0)`,
		projectID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Environment, error) { return scanEnvironment(r) })
}

// GetEnvironment finds an environment by id or name.
func (s *Store) GetEnvironment(ctx context.Context, ref string) (Environment, error) {
	e, err := scanEnvironment(s.pool.QueryRow(ctx,
		`select `+envColumns+` from environments where `+envRef, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, NotFound("environment %q", ref)
	}
	return e, err
}

// envRef matches an environment by $1, its id (as its text, lowercase) or
// its name, with an index either way: "id::text = $1" could use none, so
// every lookup (one per API request) read the whole table.
const envRef = `(id = case when $1 ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then $1::uuid end
	or name = $1)`

// EnvironmentPatch holds the fields PATCH may change; nil means unchanged.
type EnvironmentPatch struct {
	Description *string
	Halted      *bool
	Settings    map[string]json.RawMessage
}

// UpdateEnvironment applies a patch and returns the new environment.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, p EnvironmentPatch) (Environment, error) {
	out, _, err := s.UpdateEnvironmentReleasing(ctx, id, p)
	return out, err
}

// UpdateEnvironmentReleasing is UpdateEnvironment that also returns what
// a resume released: a patch that resumes a halted environment releases,
// in the same transaction, the version a compile or auto_release would
// have released while it was halted (HoldRelease), unless a newer one
// was released meanwhile. nil: nothing was released.
func (s *Store) UpdateEnvironmentReleasing(ctx context.Context, id string, p EnvironmentPatch) (Environment, *Release, error) {
	var out Environment
	var rel *Release
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := scanEnvironment(tx.QueryRow(ctx,
			`select `+envColumns+` from environments where id = $1::uuid for update`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound("environment %q", id)
		}
		if err != nil {
			return err
		}
		if p.Description != nil {
			e.Description = *p.Description
		}
		if p.Halted != nil {
			e.Halted = *p.Halted
		}
		set, errs := ApplySettings(e.Settings, p.Settings)
		if len(errs) > 0 {
			return errs[0]
		}
		raw, err := json.Marshal(set)
		if err != nil {
			return err
		}
		resumed := p.Halted != nil && !*p.Halted
		out, err = scanEnvironment(tx.QueryRow(ctx, `
			update environments set description = $2, halted = $3, settings = $4, updated_at = now()
			where id = $1::uuid returning `+envColumns, id, e.Description, e.Halted, raw))
		if err != nil || !resumed {
			return err
		}
		var held *int64
		if err := tx.QueryRow(ctx, `select held_version from environments where id = $1::uuid`, id).Scan(&held); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `update environments set held_version = null where id = $1::uuid`, id); err != nil {
			return err
		}
		if held == nil || (out.ReleasedVersion != nil && *held <= *out.ReleasedVersion) {
			return nil
		}
		r, err := releaseVersion(ctx, tx, id, *held)
		if errors.Is(err, ErrNotFound) {
			return nil // deleted meanwhile (delete a version)
		}
		if err != nil {
			return fmt.Errorf("release the held version %d: %w", *held, err)
		}
		rel = &r
		out, err = scanEnvironment(tx.QueryRow(ctx, `select `+envColumns+` from environments where id = $1::uuid`, id))
		return err
	})
	return out, rel, err
}

// ReleaseUnlessHalted is ReleaseVersion for a release nobody asked for
// by hand (a compile's, auto_release's, a fact's recompile): a halted
// environment releases nothing but holds the version (held true), under
// its lock, so a halt that commits first is never passed. Resuming
// releases the newest held version (UpdateEnvironmentReleasing); a
// release of it or of a newer one meanwhile ends the hold.
func (s *Store) ReleaseUnlessHalted(ctx context.Context, envID string, version int64) (rel Release, held bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		if !e.Halted {
			rel, err = releaseVersion(ctx, tx, envID, version)
			return err
		}
		held = true
		_, err = tx.Exec(ctx, `update environments set held_version = greatest(held_version, $2)
			where id = $1::uuid and (released_version is null or released_version < $2)`, envID, version)
		return err
	})
	return rel, held, err
}

// DeleteEnvironment removes an environment and everything it holds; a
// protected one is refused (*ProtectedError). The service inventory goes
// first (what ClearEnvironment removes): its instances name their entity
// without a cascade, which the environment's own cascade would trip over.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, id)
		if err != nil {
			return err
		}
		if e.Protected {
			return &ProtectedError{Environment: e.Name, Operation: "delete"}
		}
		if err := clearEnvironment(ctx, tx, id, &Cleared{}); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `delete from environments where id = $1::uuid`, id)
		return err
	})
}
