package server

import (
	"context"
	"time"

	"github.com/intendhq/intend/internal/store"
)

// reconcileNotifications notifies of the agents that have had no live
// executor for longer than their environment's agent_timeout, and
// resolves the notifications of those that have one again
// (store.CheckAgentExecutors), counting from this server's start at the
// earliest: after an outage of the whole cluster the executors have
// agent_timeout to report again before their agents are notified of.
// Compile and run failures are notified
// where they are recorded (store.FinishCompile, store.FinishRun). Every
// replica's reconciler runs it: the store writes one notification per
// agent and condition, whoever looks.
func (s *Server) reconcileNotifications(ctx context.Context, envs []store.Environment) {
	checks := make([]store.AgentCheck, 0, len(envs))
	for _, e := range envs {
		timeout := time.Duration(e.Settings.AgentTimeout) * time.Second
		if timeout <= 0 {
			timeout = time.Duration(store.DefaultSettings().AgentTimeout) * time.Second
		}
		checks = append(checks, store.AgentCheck{EnvironmentID: e.ID, Timeout: timeout, NotBefore: s.watchingSince})
	}
	n, err := s.store.CheckAgentExecutors(ctx, checks)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("reconcile: notifications of agents without executor", "error", err)
	case n > 0:
		s.log.Info("notified of agents without executor", "notifications", n)
	}
}
