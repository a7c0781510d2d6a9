package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/intendhq/intend/internal/names"
)

// RouteOptions is what the server that plans a run knows about its
// embedded executors.
type RouteOptions struct {
	// Embedded: the server runs embedded executors, which serve the
	// agents the environment's autostart_agents setting lists, at most
	// EmbeddedLimit of them (the first by name).
	Embedded      bool
	EmbeddedLimit int
}

// AgentRoutes returns the task queue each of agents' batches go to
// (docs/architecture.md, "Dispatch at scale"), the first rule that
// applies winning:
//  1. the queue of a live executor registration that serves the agent
//     (not an embedded one), the most recently seen first;
//  2. the environment's embedded queue, for an agent this server's
//     embedded executors serve (o), or a live embedded executor (of
//     another replica) serves;
//  3. the queue of any other registration that served it (stopped, or
//     not seen for a while, within ExecutorForgetAfter): it comes back
//     to the queue it left; an external one before an embedded one;
//  4. the agent's own queue, names.AgentTaskQueue, which an executor of
//     that one agent polls.
//
// Live holds the agents whose queue a live executor polls now.
func (s *Store) AgentRoutes(ctx context.Context, envID string, agents []string, o RouteOptions) (Routes, error) {
	e, err := s.GetEnvironment(ctx, envID)
	if err != nil {
		return Routes{}, err
	}
	out := Routes{Queues: make(map[string]string, len(agents)), Live: map[string]bool{}}
	if len(agents) == 0 {
		return out, nil
	}
	type reg struct {
		queue string
		live  bool
	}
	regs := map[string]reg{}
	// embeddedRegs: the agents an embedded registration serves, and
	// whether a live one does.
	embeddedRegs := map[string]bool{}
	rows, err := s.pool.Query(ctx, `select a, task_queue, embedded,
		  stopped_at is null and last_seen > now() - make_interval(secs => $3) as live
		from executors, unnest(agents) a
		where environment_id = $1::uuid and agents && $2 and a = any($2) and task_queue is not null
		order by live desc, last_seen desc, name`, envID, agents, ExecutorLiveWithin.Seconds())
	if err != nil {
		return Routes{}, fmt.Errorf("route agents: %w", err)
	}
	for rows.Next() {
		var a string
		var r reg
		var embedded bool
		if err := rows.Scan(&a, &r.queue, &embedded, &r.live); err != nil {
			return Routes{}, fmt.Errorf("route agents: %w", err)
		}
		if embedded {
			embeddedRegs[a] = embeddedRegs[a] || r.live
			continue
		}
		if _, seen := regs[a]; !seen {
			regs[a] = r // the first row of an agent is its best
		}
	}
	if err := rows.Err(); err != nil {
		return Routes{}, fmt.Errorf("route agents: %w", err)
	}
	var embedded func(string) bool
	if o.Embedded {
		embedded, err = s.embeddedServes(ctx, e, o.EmbeddedLimit)
		if err != nil {
			return Routes{}, err
		}
	}
	for _, a := range agents {
		r, registered := regs[a]
		liveEmbedded, embeddedRegistered := embeddedRegs[a]
		switch {
		case registered && r.live:
			out.Queues[a], out.Live[a] = r.queue, true
		case embedded != nil && embedded(a), liveEmbedded:
			out.Queues[a], out.Live[a] = names.EmbeddedTaskQueue(e.Name), liveEmbedded
		case registered:
			out.Queues[a] = r.queue
		case embeddedRegistered:
			out.Queues[a] = names.EmbeddedTaskQueue(e.Name)
		default:
			out.Queues[a] = names.AgentTaskQueue(e.Name, a)
		}
	}
	return out, nil
}

// Routes are the task queues of agents, and whether a live executor
// polls each.
type Routes struct {
	Queues map[string]string
	Live   map[string]bool
}

// releasedAgent is a row when agent a (of the outer query) has a
// released resource: the first one the agent's index (resource_state_agent,
// in its order) finds. Written as a lateral subquery with a limit, not
// exists (…): PostgreSQL may run an exists as a hash semi-join that reads
// resource_state whole (or, without the order, a scan for each agent), and did,
// right after a deploy of 100,000 resources, for a release of one change
// (issue 28: 130–200 ms and 5,800 blocks each).
const releasedAgent = `select 1 from resource_state rs
	where rs.environment_id = a.environment_id and rs.agent = a.name and rs.intent_hash is not null
	order by rs.resource_id limit 1`

// servedAgent is a row when the embedded executor serves agent a (of the
// outer query): one of a released resource (releasedAgent), or any agent
// of an environment with a dry-run open, since a dry-run of a version not
// released yet names agents no released resource has (the first dry-run
// of a new project: all of them), and nothing would run its batches
// (TestFirstDryrunOfANewEnvironment). Each probe stops at its first row.
const servedAgent = `(` + releasedAgent + `) union all (select 1 from deploy_runs dr
	where dr.environment_id = a.environment_id and dr.action = 'dryrun' and dr.status in ('pending', 'running')
	limit 1) limit 1`

// embeddedAgentsSQL lists the agents environment $1's embedded executor
// serves (servedAgent), by name (bytes).
const embeddedAgentsSQL = `select a.name from agents a cross join lateral (` + servedAgent + `) r
	where a.environment_id = $1::uuid
	order by a.name collate "C"`

// embeddedServes returns whether the embedded executors of e serve an
// agent: one its setting lists, among the first limit such agents of
// the released resources (and, during a dry-run, of the environment) by
// name (as the server's autostart decides).
func (s *Store) embeddedServes(ctx context.Context, e Environment, limit int) (func(string) bool, error) {
	if !slices.Contains(e.Settings.AutostartAgents, "*") && len(e.Settings.AutostartAgents) <= limit {
		// Fewer names listed than the limit: every one is served.
		return e.Settings.ServesAgent, nil
	}
	rows, err := s.pool.Query(ctx, embeddedAgentsSQL, e.ID)
	if err != nil {
		return nil, fmt.Errorf("route agents: the embedded executor's: %w", err)
	}
	var served []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, fmt.Errorf("route agents: the embedded executor's: %w", err)
		}
		if e.Settings.ServesAgent(a) && len(served) < limit {
			served = append(served, a)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("route agents: the embedded executor's: %w", err)
	}
	return func(a string) bool { _, ok := slices.BinarySearch(served, a); return ok }, nil
}
