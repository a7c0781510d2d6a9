package agent

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/workflows"
)

// Manager starts and stops agent workers: one Temporal worker per
// (environment, agent) task queue, each running the Executor's activity. It is safe for concurrent use.
type Manager struct {
	client     client.Client
	activities *Executor
	log        *slog.Logger
	// BatchesPerAgent bounds the batches one agent's worker runs at once.
	batchesPerAgent int

	mu      sync.Mutex
	workers map[string]worker.Worker
	served  map[string][]string // agents by environment name, in Serve order
	notify  func()
	drain   *drain
}

// NewManager returns a manager whose workers run acts.
func NewManager(c client.Client, acts *Executor, log *slog.Logger, batchesPerAgent int) *Manager {
	if batchesPerAgent <= 0 {
		batchesPerAgent = 4
	}
	return &Manager{client: c, activities: acts, log: log, batchesPerAgent: batchesPerAgent, workers: map[string]worker.Worker{},
		served: map[string][]string{}, drain: newDrain()}
}

// Serve makes sure a worker polls the task queue of agent in env.
func (m *Manager) Serve(env, agent string) error {
	q := workflows.AgentTaskQueue(env, agent)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.workers[q]; ok {
		return nil
	}
	w := worker.New(m.client, q, worker.Options{
		MaxConcurrentActivityExecutionSize: m.batchesPerAgent,
		DisableWorkflowWorker:              true,
		Interceptors:                       []interceptor.WorkerInterceptor{m.drain},
		WorkerStopTimeout:                  stopGrace,
	})
	m.activities.Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker for %s: %w", q, err)
	}
	m.workers[q] = w
	m.served[env] = append(m.served[env], agent)
	m.log.Info("executor serves agent", "environment", env, "agent", agent, "task_queue", q)
	if m.notify != nil {
		go m.notify()
	}
	return nil
}

// Served returns the agents served, by environment name, sorted.
func (m *Manager) Served() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.served))
	for env, agents := range m.served {
		out[env] = slices.Sorted(slices.Values(agents))
	}
	return out
}

// Notify makes Serve call f, in a goroutine of its own, whenever it
// starts serving a new agent (the registration reports it at once).
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
	ws := m.workers
	m.workers = map[string]worker.Worker{}
	m.served = map[string][]string{}
	m.mu.Unlock()
	m.drain.stopping()
	defer m.drain.reset()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func(w worker.Worker) { defer wg.Done(); w.Stop() }(w)
	}
	wg.Wait()
}

// Unserve stops the worker of agent in env, if one runs: an agent that no
// released version names any more stops costing a poller. A batch it is
// running finishes first (at most stopGrace), as at Stop.
func (m *Manager) Unserve(env, agent string) {
	q := workflows.AgentTaskQueue(env, agent)
	m.mu.Lock()
	w, ok := m.workers[q]
	if ok {
		delete(m.workers, q)
		m.served[env] = slices.DeleteFunc(m.served[env], func(a string) bool { return a == agent })
		if len(m.served[env]) == 0 {
			delete(m.served, env)
		}
	}
	notify := m.notify
	m.mu.Unlock()
	if !ok {
		return
	}
	w.Stop()
	m.log.Info("executor no longer serves agent", "environment", env, "agent", agent, "task_queue", q)
	if notify != nil {
		go notify()
	}
}
