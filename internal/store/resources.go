package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
)

// ResourceState is the deploy state of one released resource.
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

const stateColumns = `resource_id, resource_type, agent, intent_version, coalesce(encode(intent_hash, 'hex'), ''),
	coalesce(encode(deployed_hash, 'hex'), ''), last_result, compliance, blocked, intent_hash is null,
	last_attempt, last_success, last_produced_change`

func scanState(row pgx.Row) (ResourceState, error) {
	var s ResourceState
	return s, row.Scan(&s.ResourceID, &s.Type, &s.Agent, &s.IntentVersion, &s.IntentHash, &s.DeployedHash,
		&s.LastResult, &s.Compliance, &s.Blocked, &s.Orphan, &s.LastAttempt, &s.LastSuccess, &s.LastProducedChange)
}

// ResourceFilter selects resources; empty fields do not filter.
type ResourceFilter struct {
	Agent      string
	Type       string
	Result     string
	Compliance string
	Orphans    bool   // include resources no longer in the released version
	After      string // cursor: the last resource id of the previous page
	// Sort orders the page by a column first ("" the id alone; agent,
	// type or result), the id second; AfterKey is then the previous
	// page's last value of that column (with After its id).
	Sort     string
	AfterKey string
	Limit    int
}

// ResourceSorts are the columns ListResources sorts by, by their name.
var ResourceSorts = map[string]string{"agent": "agent", "type": "resource_type", "result": "coalesce(last_result, '')"}

// SortKey is r's value of the sort column.
func (r ResourceState) SortKey(sort string) string {
	switch sort {
	case "agent":
		return r.Agent
	case "type":
		return r.Type
	case "result":
		return r.LastResult
	}
	return ""
}

// ListResources returns one page of resources in id order, or in the
// order of f.Sort and then id.
func (s *Store) ListResources(ctx context.Context, envID string, f ResourceFilter) ([]ResourceState, error) {
	where := []string{"environment_id = $1::uuid", "resource_id > $2"}
	args := []any{envID, f.After}
	order := "resource_id"
	if col, ok := ResourceSorts[f.Sort]; ok {
		where[1] = fmt.Sprintf("(%s, resource_id) > ($3, $2)", col)
		args = append(args, f.AfterKey)
		order = col + ", resource_id"
	}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Agent != "" {
		add("agent = $%d", f.Agent)
	}
	if f.Type != "" {
		add("resource_type = $%d", f.Type)
	}
	if f.Result != "" {
		add("last_result = $%d", f.Result)
	}
	if f.Compliance != "" {
		add("compliance = $%d", f.Compliance)
	}
	if !f.Orphans {
		where = append(where, "intent_hash is not null")
	}
	args = append(args, f.Limit)
	q := fmt.Sprintf(`select %s from resource_state where %s order by %s limit $%d`,
		stateColumns, strings.Join(where, " and "), order, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ResourceState, error) { return scanState(r) })
}

// GetResource returns one resource's deploy state.
func (s *Store) GetResource(ctx context.Context, envID, resourceID string) (ResourceState, error) {
	st, err := scanState(s.pool.QueryRow(ctx, `select `+stateColumns+` from resource_state
		where environment_id = $1::uuid and resource_id = $2`, envID, resourceID))
	if errors.Is(err, pgx.ErrNoRows) {
		return st, NotFound("resource %q", resourceID)
	}
	return st, err
}

// Action is one record of the resource action log.
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
	// ErrorClass is permanent, transient or throttled for a failed attempt.
	ErrorClass *string `json:"error_class,omitempty"`
	WorkflowID string  `json:"workflow_id"`
	RunID      string  `json:"run_id"`
	Attempt    int     `json:"attempt"`
	// Executor is the name of the executor that ran the attempt.
	Executor string `json:"executor,omitempty"`
}

// ActionFilter selects action records, newest first.
type ActionFilter struct {
	ResourceID string
	Action     string     // deploy, repair or dryrun
	Result     string     // deployed, failed, ...
	Since      *time.Time // started at or after
	Until      *time.Time // started before
	Before     int64      // cursor: the last id of the previous page; 0 = newest
	Limit      int
	// Results, when not empty, keeps the actions with any of these
	// results (with Result, those of both).
	Results []string
	// WorkflowID keeps the actions of one workflow: a deploy run's
	// (its workflow_id), or a dry-run's.
	WorkflowID string
	// Outputs says whether the records' sensitive outputs are returned;
	// the zero value redacts them.
	Outputs Outputs
}

// Outputs says whether a read of action records returns the sensitive
// outputs adapters recorded (a command's stdout, a file's content found
// on the target: see ledger.RedactLogs). Only a reader who could have put
// the resource into a version (author or admin of its environment) is
// given them; the zero value redacts, so that a read path that does not
// say otherwise shows no secret.
type Outputs int

const (
	// RedactOutputs replaces sensitive outputs by ledger.RedactedOutput.
	RedactOutputs Outputs = iota
	// ShowOutputs returns them as recorded.
	ShowOutputs
)

// redact applies o to the logs and changes of a record.
func (o Outputs) redact(logs, changes *json.RawMessage) {
	if o == ShowOutputs {
		return
	}
	*logs = ledger.RedactLogs(*logs)
	*changes = ledger.RedactChanges(*changes)
}

// ListActions returns action records, newest first, with their sensitive
// outputs as f.Outputs says.
func (s *Store) ListActions(ctx context.Context, envID string, f ActionFilter) ([]Action, error) {
	before := f.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	where := "environment_id = $1::uuid and id < $2"
	args := []any{envID, before, f.Limit}
	// Separate predicates (not "$x = '' or …"), so the planner uses the
	// per-resource index.
	add := func(cond string, v any) {
		args = append(args, v)
		where += fmt.Sprintf(" and "+cond, len(args))
	}
	if f.ResourceID != "" {
		add("resource_id = $%d", f.ResourceID)
	}
	if f.Action != "" {
		add("action = $%d", f.Action)
	}
	if f.Result != "" {
		add("result = $%d", f.Result)
	}
	if len(f.Results) > 0 {
		add("result = any($%d)", f.Results)
		if !slices.Contains(f.Results, string(ledger.ResultDeployed)) {
			// Said outright, so that the planner may take the partial
			// index of what did not deploy (migration 024): a run's
			// failures, among its thousands deployed.
			where += " and result <> 'deployed'"
		}
	}
	if f.WorkflowID != "" {
		add("workflow_id = $%d", f.WorkflowID)
	}
	if f.Since != nil {
		add("started_at >= $%d", *f.Since)
	}
	if f.Until != nil {
		add("started_at < $%d", *f.Until)
	}
	q := `select id, resource_id, version, action, reason, started_at, finished_at, result, changes, logs,
		error, error_class, workflow_id, run_id, attempt, coalesce(executor, '') from resource_actions
		where ` + where + ` order by id desc limit $3`
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	acts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) {
		var a Action
		err := r.Scan(&a.ID, &a.ResourceID, &a.Version, &a.Action, &a.Reason, &a.StartedAt, &a.FinishedAt,
			&a.Result, &a.Changes, &a.Logs, &a.Error, &a.ErrorClass, &a.WorkflowID, &a.RunID, &a.Attempt, &a.Executor)
		f.Outputs.redact(&a.Logs, &a.Changes)
		return a, err
	})
	if err != nil {
		return nil, err
	}
	more, err := s.listUnchanged(ctx, envID, before, f)
	if err != nil || len(more) == 0 {
		return acts, err
	}
	// Both lists are newest first: their merge's first Limit are the
	// newest Limit records of the log (listUnchanged says why).
	acts = append(acts, more...)
	slices.SortFunc(acts, func(a, b Action) int { return cmp.Compare(b.ID, a.ID) })
	return acts[:min(len(acts), f.Limit)], nil
}

// Fact is one value an adapter discovered on the target of a resource,
// or one a user set (a parameter).
type Fact struct {
	ResourceID string          `json:"resource_id"`
	Name       string          `json:"name"`
	Value      json.RawMessage `json:"value"`
	// UpdatedAt is when the value last changed.
	UpdatedAt time.Time `json:"updated_at"`
	// Source is adapter (discovered on the target) or user (set through
	// the API: an adapter's value of the same name never replaces it).
	Source string `json:"source"`
}

// ListFacts returns the facts of one resource of the environment, or of
// all its resources when resourceID is "", ordered by resource and name.
func (s *Store) ListFacts(ctx context.Context, envID, resourceID string) ([]Fact, error) {
	return s.ListFactsPage(ctx, envID, resourceID, FactKey{}, 0)
}

// FactKey orders facts: by resource, then name.
type FactKey struct {
	ResourceID string `json:"r"`
	Name       string `json:"n"`
}

// ListFactsPage is ListFacts from after on (the zero key: from the
// start), at most limit facts (0: all).
func (s *Store) ListFactsPage(ctx context.Context, envID, resourceID string, after FactKey, limit int) ([]Fact, error) {
	rows, err := s.pool.Query(ctx, `select resource_id, name, value, updated_at, source from facts
		where environment_id = $1::uuid and ($2 = '' or resource_id = $2) and (resource_id, name) > ($3, $4)
		order by resource_id, name limit nullif($5, 0)`, envID, resourceID, after.ResourceID, after.Name, limit)
	if err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	facts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Fact, error) {
		var f Fact
		return f, r.Scan(&f.ResourceID, &f.Name, &f.Value, &f.UpdatedAt, &f.Source)
	})
	if err != nil {
		return nil, fmt.Errorf("list facts: %w", err)
	}
	return facts, nil
}

// UserFactLimitError is a user fact beyond the environment's limit: it has
// that many user-set facts already. The API answers it 422.
type UserFactLimitError struct{ Limit int }

func (e *UserFactLimitError) Error() string {
	return fmt.Sprintf("the environment has %d user-set facts, the most it may: remove one first", e.Limit)
}

// SetUserFact sets the fact name of resource rid to value (JSON) on
// behalf of a user: source user, which an adapter's discovered value of
// the same name never replaces. It replaces an adapter's value, and a
// user's. A fact that is not user-set yet is refused with a
// *UserFactLimitError when the environment has max user-set facts (max
// <= 0: no limit); sets of one environment are serialised by a lock on
// its row, so that the count holds.
func (s *Store) SetUserFact(ctx context.Context, envID, rid, name string, value json.RawMessage, max int) (Fact, error) {
	var f Fact
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		if max > 0 {
			var n int
			var exists bool
			if err := tx.QueryRow(ctx, `select count(*),
				       coalesce(bool_or(resource_id = $2 and name = $3), false)
				from facts where environment_id = $1::uuid and source = 'user'`, envID, rid, name).Scan(&n, &exists); err != nil {
				return err
			}
			if !exists && n >= max {
				return &UserFactLimitError{Limit: max}
			}
		}
		return tx.QueryRow(ctx, `insert into facts (environment_id, resource_id, name, value, source)
			values ($1::uuid, $2, $3, $4::jsonb, 'user')
			on conflict (environment_id, resource_id, name)
			do update set value = excluded.value, source = 'user', updated_at = now()
			returning resource_id, name, value, updated_at, source`, envID, rid, name, string(value)).
			Scan(&f.ResourceID, &f.Name, &f.Value, &f.UpdatedAt, &f.Source)
	})
	return f, err
}

// DeleteUserFact removes the user-set fact name of resource rid; an
// adapter may report its own value again. A fact that is not user-set
// (none, or an adapter's) is a *NotFoundError.
func (s *Store) DeleteUserFact(ctx context.Context, envID, rid, name string) error {
	tag, err := s.pool.Exec(ctx, `delete from facts
		where environment_id = $1::uuid and resource_id = $2 and name = $3 and source = 'user'`, envID, rid, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return NotFound("user-set fact %q of %s", name, rid)
	}
	return nil
}
