package server

import (
	"context"
	"sort"

	"go.temporal.io/sdk/client"

	"github.com/intendhq/intend/activities/agent"
	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
)

// startEmbedded sets up the embedded executor as `intend executor` runs:
// the built-in adapters, a process-wide adapter cache (swept by Start's
// goroutines, closed by Shutdown), the secrets directory, and a
// registration under its name in every environment it serves, reported
// as soon as it serves a new agent.
func (s *Server) startEmbedded(st *store.Store, tc client.Client, tel *telemetry.Telemetry) {
	id := executor.NewIdentity(s.cfg.ExecutorName, s.cfg.Version, true)
	s.cache = adapters.NewCache()
	acts := &agent.Executor{Ledger: st.Ledger(), Adapters: Registry(), Concurrency: s.cfg.ExecutorConcurrency,
		Log: s.log, Metrics: tel, Tracer: s.cfg.Tracing.Tracer(), Cache: s.cache, Name: id.Name}
	acts.Secrets = &adapters.Secrets{Dir: s.cfg.SecretsDir, EnvPrefix: s.cfg.SecretEnvPrefix}
	s.executors = agent.NewManager(tc, acts, s.log, 0)
	s.reporter = &executor.Reporter{Registry: st, Identity: id, Served: s.executors.Served, Log: s.log}
	s.executors.Notify(s.reporter.Wake)
}

// autostart makes the embedded executor serve every agent of the released resources that the
// environment's autostart_agents setting assigns to the embedded executor.
func (s *Server) autostart(ctx context.Context) error {
	agents, settings, err := s.store.ServedAgents(ctx)
	if err != nil {
		return err
	}
	envs := make([]string, 0, len(agents))
	for env := range agents {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	for _, env := range envs {
		for _, a := range agents[env] {
			if !settings[env].ServesAgent(a) {
				continue
			}
			if err := s.executors.Serve(env, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// serveNewAgents is the schedulers' BeforeRun: with an embedded executor,
// it serves the agents a release or dry-run may need before the run's
// first batch looks for an executor. A failure is logged; the reconciler
// tries again.
func (s *Server) serveNewAgents(ctx context.Context, env store.Environment) {
	if s.executors == nil {
		return
	}
	if err := s.autostart(ctx); err != nil {
		s.log.Warn("embedded executor: autostart failed", "environment", env.Name, "error", err)
	}
}
