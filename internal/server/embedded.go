package server

import (
	"go.temporal.io/sdk/client"

	"github.com/intendhq/intend/activities"
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
	acts := &activities.Executor{Store: st, Adapters: Registry(), Concurrency: s.cfg.ExecutorConcurrency,
		Log: s.log, Metrics: tel, Cache: s.cache, Name: id.Name}
	acts.Secrets = &adapters.Secrets{Dir: s.cfg.SecretsDir, EnvPrefix: s.cfg.SecretEnvPrefix}
	s.executors = executor.NewManager(tc, acts, s.log, 0)
	s.reporter = &executor.Reporter{Store: st, Identity: id, Served: s.executors.Served, Log: s.log}
	s.executors.Notify(s.reporter.Wake)
}
