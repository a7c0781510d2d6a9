package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
)

// Request asks the scheduler for deploy work. Kind "deploy" deploys what
// is not compliant (new intent, failures, skips); "repair" re-verifies
// every resource in scope, compliant or not. Agents and ResourceIDs narrow
// the scope (nil: everything); StaleBefore limits a repair to resources not
// attempted since then.
type Request struct {
	ID          int64      `json:"id"`
	Kind        string     `json:"kind"`
	Reason      string     `json:"reason"`
	Agents      []string   `json:"agents,omitempty"`
	ResourceIDs []string   `json:"resource_ids,omitempty"`
	StaleBefore *time.Time `json:"stale_before,omitempty"`
	RequestedAt time.Time  `json:"requested_at"`
	// Auto marks requests intend made itself (timers, recovered
	// dependencies, events); they are dropped when they have nothing to do.
	Auto bool `json:"auto"`
	// Run is the deploy run that took the request; nil while queued, 0 when
	// an automatic request had nothing to do.
	Run *int64 `json:"run"`
	// RequestedBy is the actor who asked for it (auth.Principal.Actor).
	RequestedBy string `json:"requested_by,omitempty"`
}

const requestColumns = `id, kind, reason, agents, resource_ids, stale_before, requested_at, auto, run,
	coalesce(requested_by, '')`

func scanRequest(row pgx.Row) (Request, error) {
	var r Request
	return r, row.Scan(&r.ID, &r.Kind, &r.Reason, &r.Agents, &r.ResourceIDs, &r.StaleBefore, &r.RequestedAt, &r.Auto, &r.Run,
		&r.RequestedBy)
}

func insertRequest(ctx context.Context, q pgx.Tx, envID string, r Request) (Request, error) {
	if k := ledger.Action(r.Kind); k != ledger.ActionDeploy && k != ledger.ActionRepair && k != ledger.ActionDryrun {
		return r, fmt.Errorf("request kind %q: want deploy, repair or dryrun", r.Kind)
	}
	return scanRequest(q.QueryRow(ctx, `insert into deploy_requests
		(environment_id, kind, reason, agents, resource_ids, stale_before, auto, requested_by)
		values ($1::uuid, $2, $3, $4, $5, $6, $7, $8) returning `+requestColumns,
		envID, r.Kind, r.Reason, nilIfEmpty(r.Agents), nilIfEmpty(r.ResourceIDs), r.StaleBefore, r.Auto, ActorOf(ctx)))
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// RequestDeploy queues a request for the environment's scheduler.
func (s *Store) RequestDeploy(ctx context.Context, envID string, r Request) (Request, error) {
	var out Request
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = insertRequest(ctx, tx, envID, r)
		if isForeignKeyViolation(err) {
			return NotFound("environment %q", envID)
		}
		return err
	})
	return out, err
}

// GetRequest returns one request.
func (s *Store) GetRequest(ctx context.Context, envID string, id int64) (Request, error) {
	r, err := scanRequest(s.pool.QueryRow(ctx, `select `+requestColumns+` from deploy_requests
		where environment_id = $1::uuid and id = $2`, envID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, NotFound("deploy request %d", id)
	}
	return r, err
}

// awaitsVersion is the condition (over resource_state rs) of the resources
// that only a new version can change: undefined ones, and those skipped
// for an undefined resource since their intent last changed (when what
// they wait for is deployed, an automatic request naming them follows).
const awaitsVersion = `(rs.compliance = 'undefined'
	or (rs.compliance = 'non_compliant' and rs.last_result = 'skipped_for_undefined'))`

// scope builds the SQL condition (over resource_state rs) selecting the
// resources that any of reqs asks for; args continue the caller's list.
//
// An automatic request that does not name its resources (a timer, an
// unpaused agent) leaves out those that await a new version: running them
// again would only record the same again, and would keep the timers of an
// environment waiting for a fact from ever going idle.
func scope(reqs []Request, args []any) (string, []any) {
	var ors []string
	for _, r := range reqs {
		var and []string
		switch {
		case r.Kind == "deploy":
			and = append(and, "rs.compliance <> 'compliant'")
		case r.StaleBefore != nil:
			args = append(args, *r.StaleBefore)
			and = append(and, fmt.Sprintf(
				"(rs.compliance <> 'compliant' or rs.last_attempt is null or rs.last_attempt < $%d)", len(args)))
		}
		if r.Auto && len(r.ResourceIDs) == 0 {
			and = append(and, "not "+awaitsVersion)
		}
		if len(r.Agents) > 0 {
			args = append(args, r.Agents)
			and = append(and, fmt.Sprintf("rs.agent = any($%d)", len(args)))
		}
		if len(r.ResourceIDs) > 0 {
			args = append(args, r.ResourceIDs)
			and = append(and, fmt.Sprintf("rs.resource_id = any($%d)", len(args)))
		}
		if len(and) == 0 {
			return "true", args
		}
		ors = append(ors, "("+strings.Join(and, " and ")+")")
	}
	if len(ors) == 0 {
		return "false", args
	}
	return "(" + strings.Join(ors, " or ") + ")", args
}

// candidates is the condition every planned resource meets besides its
// scope: released, and not on a paused agent. $1 is the environment id.
const candidates = `rs.environment_id = $1::uuid and rs.intent_hash is not null
	and not exists (select 1 from agents a where a.environment_id = rs.environment_id
	                and a.name = rs.agent and a.paused)`

// Take is what TakeRequests did.
type Take struct {
	// Run is the deploy run created (or adopted); nil when there was
	// nothing to do or the environment is halted.
	Run *DeployRun
	// Kinds are the kinds of the run's requests, sorted and distinct.
	Kinds    []string
	Halted   bool
	Settings Settings
}

// TakeRequests is the scheduler's one step: it queues the timers' requests
// that have anything to do, takes every queued request of the environment
// into one new deploy run, and returns it. token makes it idempotent: a
// repeat with the same token returns the same run. With adopt, an open run
// (pending or running, e.g. after Temporal lost its store) is returned
// instead, so its workflow is started again. A halted environment takes
// nothing.
func (s *Store) TakeRequests(ctx context.Context, envID, token string, timers []Request, adopt bool) (Take, error) {
	var t Take
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		t.Settings, t.Halted = e.Settings, e.Halted
		run, err := scanRun(tx.QueryRow(ctx, `select `+runColumns+` from deploy_runs
			where environment_id = $1::uuid and token = $2`, envID, token))
		if err == nil {
			t.Run = &run
			t.Kinds, err = runKinds(ctx, tx, envID, run.Run)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if e.Halted {
			return nil
		}
		if adopt {
			run, err := scanRun(tx.QueryRow(ctx, `select `+runColumns+` from deploy_runs
				where environment_id = $1::uuid and status in ('pending', 'running') and action <> 'dryrun'
				order by run limit 1`, envID))
			if err == nil {
				t.Run = &run
				t.Kinds, err = runKinds(ctx, tx, envID, run.Run)
				return err
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		for _, r := range timers {
			r.Auto = true
			if due, err := hasWork(ctx, tx, envID, r); err != nil || !due {
				if err != nil {
					return err
				}
				continue
			}
			if _, err := insertRequest(ctx, tx, envID, r); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `select `+requestColumns+` from deploy_requests
			where environment_id = $1::uuid and run is null order by id`, envID)
		if err != nil {
			return err
		}
		queued, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Request, error) { return scanRequest(r) })
		if err != nil {
			return err
		}
		// Automatic requests with nothing (left) to do are closed, not run.
		var reqs []Request
		var idle []int64
		for _, r := range queued {
			if r.Auto {
				due, err := hasWork(ctx, tx, envID, r)
				if err != nil {
					return err
				}
				if !due {
					idle = append(idle, r.ID)
					continue
				}
			}
			reqs = append(reqs, r)
		}
		if len(idle) > 0 {
			if _, err := tx.Exec(ctx, `update deploy_requests set run = 0 where environment_id = $1::uuid and id = any($2)`,
				envID, idle); err != nil {
				return err
			}
		}
		if len(reqs) == 0 {
			return nil
		}
		action, reason, kinds := merge(reqs)
		var version int64
		if e.ReleasedVersion != nil {
			version = *e.ReleasedVersion
		}
		run, err = insertRun(ctx, tx, e, version, action, reason, &token)
		if err != nil {
			return err
		}
		ids := make([]int64, len(reqs))
		for i, r := range reqs {
			ids[i] = r.ID
		}
		if _, err := tx.Exec(ctx, `update deploy_requests set run = $2 where environment_id = $1::uuid and id = any($3)`,
			envID, run.Run, ids); err != nil {
			return err
		}
		t.Run, t.Kinds = &run, kinds
		return nil
	})
	return t, err
}

// hasWork reports whether request r selects any resource now.
func hasWork(ctx context.Context, tx pgx.Tx, envID string, r Request) (bool, error) {
	cond, args := scope([]Request{r}, []any{envID})
	var due bool
	err := tx.QueryRow(ctx, `select exists (select 1 from resource_state rs where `+candidates+` and `+cond+`)`,
		args...).Scan(&due)
	return due, err
}

func runKinds(ctx context.Context, tx pgx.Tx, envID string, run int64) ([]string, error) {
	rows, err := tx.Query(ctx, `select distinct kind from deploy_requests
		where environment_id = $1::uuid and run = $2 order by kind`, envID, run)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// merge names a run made of reqs: its action ("repair" when any request
// repairs), its reason (the distinct reasons in order) and the kinds.
func merge(reqs []Request) (action, reason string, kinds []string) {
	action = "deploy"
	seen := map[string]bool{}
	kindSet := map[string]bool{}
	var reasons []string
	for _, r := range reqs {
		kindSet[r.Kind] = true
		if r.Kind == "repair" {
			action = "repair"
		}
		if !seen[r.Reason] {
			seen[r.Reason] = true
			reasons = append(reasons, r.Reason)
		}
	}
	for k := range kindSet {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	const most = 5
	if len(reasons) > most {
		reasons = append(reasons[:most], fmt.Sprintf("and %d more", len(reasons)-most))
	}
	return action, strings.Join(reasons, "; "), kinds
}

// runRequests returns the requests a run took.
func runRequests(ctx context.Context, tx pgx.Tx, envID string, run int64) ([]Request, error) {
	rows, err := tx.Query(ctx, `select `+requestColumns+` from deploy_requests
		where environment_id = $1::uuid and run = $2 order by id`, envID, run)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Request, error) { return scanRequest(r) })
}

// SetHalted halts or resumes an environment.
func (s *Store) SetHalted(ctx context.Context, envID string, halted bool) (Environment, error) {
	return s.UpdateEnvironment(ctx, envID, EnvironmentPatch{Halted: &halted})
}

// SetAgentPaused pauses or unpauses one agent. Unpausing queues a deploy
// of the agent's resources, so what became due meanwhile is picked up.
func (s *Store) SetAgentPaused(ctx context.Context, envID, agent string, paused bool) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `update agents set paused = $3 where environment_id = $1::uuid and name = $2`,
			envID, agent, paused)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return NotFound("agent %q", agent)
		}
		if paused {
			return nil
		}
		_, err = insertRequest(ctx, tx, envID, Request{Kind: "deploy", Reason: "agent " + agent + " unpaused",
			Agents: []string{agent}, Auto: true})
		return err
	})
}

// Agent is an agent of an environment.
type Agent struct {
	Name      string    `json:"name"`
	Paused    bool      `json:"paused"`
	FirstSeen time.Time `json:"first_seen"`
}

// ListAgents returns the environment's agents by name.
func (s *Store) ListAgents(ctx context.Context, envID string) ([]Agent, error) {
	return s.ListAgentsPage(ctx, envID, "", 0)
}

// ListAgentsPage returns at most limit (0: every) agents of the
// environment whose name comes after after, by name.
func (s *Store) ListAgentsPage(ctx context.Context, envID, after string, limit int) ([]Agent, error) {
	rows, err := s.pool.Query(ctx, `select name, paused, first_seen from agents
		where environment_id = $1::uuid and name > $2 order by name limit nullif($3, 0)`, envID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Agent, error) {
		var a Agent
		return a, r.Scan(&a.Name, &a.Paused, &a.FirstSeen)
	})
}
