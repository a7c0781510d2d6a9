package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/workflows"
)

// Options shape a Manager's workers.
type Options struct {
	// BatchesPerAgent sizes an external executor's worker: its slots are
	// BatchesPerAgent × its agents, at most MaxBatches (default 4).
	BatchesPerAgent int
	// MaxBatches bounds the batches the executor runs at once, over all
	// its agents (default DefaultMaxBatches).
	MaxBatches int
	// Embedded: poll the environment's embedded task queue (an embedded
	// executor, whose agents change while it runs; its worker has
	// MaxBatches slots).
	Embedded bool
	// Pool names the executor's pool; empty: names.ExecutorTaskQueue's
	// default.
	Pool string
}

// DefaultMaxBatches is Options.MaxBatches when unset.
const DefaultMaxBatches = 64

// Manager runs an executor's one Temporal worker per environment: it
// polls a single task queue (names.ExecutorTaskQueue), whatever the number
// of agents the executor serves, and runs the Executor's activity for the
// batches of those agents. Agents cost a set entry, not a worker or a
// poller. It is safe for concurrent use.
type Manager struct {
	client     client.Client
	activities *Executor
	log        *slog.Logger
	opts       Options

	mu     sync.Mutex
	envs   map[string]*served // by environment name
	notify func()
	drain  *drain
}

// served is one environment's worker and the agents it takes batches of.
type served struct {
	queue  string
	worker worker.Worker
	agents []string // in Serve order
}

// NewManager returns a manager whose workers run acts.
func NewManager(c client.Client, acts *Executor, log *slog.Logger, o Options) *Manager {
	if o.BatchesPerAgent <= 0 {
		o.BatchesPerAgent = 4
	}
	if o.MaxBatches <= 0 {
		o.MaxBatches = DefaultMaxBatches
	}
	return &Manager{client: c, activities: acts, log: log, opts: o, envs: map[string]*served{}, drain: newDrain()}
}

// TaskQueue is the task queue the manager's worker polls, or would poll,
// for agents of env.
func (m *Manager) TaskQueue(env string, agents []string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.envs[env]; s != nil {
		return s.queue
	}
	return names.ExecutorTaskQueue(env, m.opts.Pool, agents, m.opts.Embedded)
}

// ServeOnly makes the manager serve exactly agents of env: the first call
// starts the environment's worker (its task queue chosen from these
// agents), later calls change the agents whose batches it takes, and an
// empty set stops it, so that an environment without agents to serve
// costs no poller.
func (m *Manager) ServeOnly(env string, agents []string) error {
	agents = slices.Compact(slices.Sorted(slices.Values(agents)))
	if len(agents) == 0 {
		m.stopEnv(env)
		return nil
	}
	m.mu.Lock()
	s := m.envs[env]
	if s != nil {
		changed := !slices.Equal(s.agents, agents)
		s.agents = agents
		notify := m.notify
		m.mu.Unlock()
		if changed {
			m.log.Info("executor serves agents", "environment", env, "agents", len(agents), "task_queue", s.queue)
			if notify != nil {
				go notify()
			}
		}
		return nil
	}
	defer m.mu.Unlock()
	q := names.ExecutorTaskQueue(env, m.opts.Pool, agents, m.opts.Embedded)
	slots := m.opts.MaxBatches
	if !m.opts.Embedded {
		slots = min(slots, m.opts.BatchesPerAgent*len(agents))
	}
	w := worker.New(m.client, q, worker.Options{
		MaxConcurrentActivityExecutionSize: slots,
		MaxConcurrentActivityTaskPollers:   min(max(slots/8, 2), 8),
		DisableWorkflowWorker:              true,
		Interceptors:                       []interceptor.WorkerInterceptor{m.drain, &servesOnly{m: m, env: env}},
		WorkerStopTimeout:                  stopGrace,
	})
	m.activities.Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker for %s: %w", q, err)
	}
	m.envs[env] = &served{queue: q, worker: w, agents: agents}
	m.log.Info("executor serves agents", "environment", env, "agents", len(agents), "task_queue", q, "batches", slots)
	if m.notify != nil {
		go m.notify()
	}
	return nil
}

// Serves reports whether the manager takes batches of agent in env.
func (m *Manager) Serves(env, agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.envs[env]
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearch(s.agents, agent)
	return ok
}

// Served returns the agents served, by environment name, sorted.
func (m *Manager) Served() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.envs))
	for env, s := range m.envs {
		out[env] = slices.Clone(s.agents)
	}
	return out
}

// Notify makes the manager call f, in a goroutine of its own, whenever
// the agents it serves change (the registration reports them at once).
func (m *Manager) Notify(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify = f
}

// Stop stops every worker. It cancels the running activities first and
// waits (at most stopGrace) for them to return and be reported failed, so
// that Temporal retries their batches on another executor at once; each
// resumes after its last recorded chunk.
func (m *Manager) Stop() {
	m.mu.Lock()
	envs := m.envs
	m.envs = map[string]*served{}
	m.mu.Unlock()
	m.drain.stopping()
	defer m.drain.reset()
	var wg sync.WaitGroup
	for _, s := range envs {
		wg.Go(s.worker.Stop)
	}
	wg.Wait()
}

// stopEnv stops the worker of env, if one runs. A batch it is running
// finishes first (at most stopGrace), as at Stop.
func (m *Manager) stopEnv(env string) {
	m.mu.Lock()
	s, ok := m.envs[env]
	delete(m.envs, env)
	notify := m.notify
	m.mu.Unlock()
	if !ok {
		return
	}
	s.worker.Stop()
	m.log.Info("executor no longer serves agents", "environment", env, "task_queue", s.queue)
	if notify != nil {
		go notify()
	}
}

// servesOnly refuses a batch of an agent the executor does not serve
// (now): a retryable error, so that Temporal hands the batch to another
// executor polling the queue. Executors of one pool serve the same
// agents; they differ for a moment when an embedded executor learns of a
// new agent before its twin of the other replica does.
type servesOnly struct {
	interceptor.WorkerInterceptorBase
	m   *Manager
	env string
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (s *servesOnly) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &servesOnlyActivity{s: s}
	a.Next = next
	return a
}

type servesOnlyActivity struct {
	interceptor.ActivityInboundInterceptorBase
	s *servesOnly
}

// NotServedError is the error type of a batch refused by an executor
// that does not serve its agent.
const NotServedError = "AgentNotServed"

// ExecuteActivity runs the activity if its batch's agents are served.
func (a *servesOnlyActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if len(in.Args) == 1 {
		if b, ok := in.Args[0].(workflows.BatchInput); ok {
			// A batch of several agents: every one of them.
			for _, agent := range b.AgentsOf() {
				if !a.s.m.Serves(a.s.env, agent) {
					return nil, temporal.NewApplicationError(fmt.Sprintf("executor %s does not serve agent %s of %s",
						a.s.m.activities.Name, agent, a.s.env), NotServedError)
				}
			}
		}
	}
	return a.Next.ExecuteActivity(ctx, in)
}
