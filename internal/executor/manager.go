// Package executor runs executors: one Temporal worker per (environment,
// agent) task queue, each hosting the registered adapters through the
// executor activities.
package executor

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// Manager starts and stops agent workers. It is safe for concurrent use.
type Manager struct {
	client     client.Client
	activities *activities.Executor
	log        *slog.Logger
	// BatchesPerAgent bounds the batches one agent's worker runs at once.
	batchesPerAgent int

	mu      sync.Mutex
	workers map[string]worker.Worker
}

// NewManager returns a manager whose workers run acts.
func NewManager(c client.Client, acts *activities.Executor, log *slog.Logger, batchesPerAgent int) *Manager {
	if batchesPerAgent <= 0 {
		batchesPerAgent = 4
	}
	return &Manager{client: c, activities: acts, log: log, batchesPerAgent: batchesPerAgent, workers: map[string]worker.Worker{}}
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
	})
	m.activities.Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker for %s: %w", q, err)
	}
	m.workers[q] = w
	m.log.Info("executor serves agent", "environment", env, "agent", agent, "task_queue", q)
	return nil
}

// Stop stops every worker, waiting for running activities to return.
func (m *Manager) Stop() {
	m.mu.Lock()
	ws := m.workers
	m.workers = map[string]worker.Worker{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func(w worker.Worker) { defer wg.Done(); w.Stop() }(w)
	}
	wg.Wait()
}

// Autostart serves every agent of the released resources that the
// environment's autostart_agents setting assigns to the embedded executor.
func (m *Manager) Autostart(ctx context.Context, st *store.Store) error {
	agents, settings, err := st.ServedAgents(ctx)
	if err != nil {
		return err
	}
	envs := make([]string, 0, len(agents))
	for env := range agents {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		for _, agent := range agents[env] {
			if !settings[env].ServesAgent(agent) {
				continue
			}
			if err := m.Serve(env, agent); err != nil {
				return err
			}
		}
	}
	return nil
}
