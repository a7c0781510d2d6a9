package server

import (
	"context"
	"path/filepath"

	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// DefaultDataDir is where a server keeps its files (the git caches of
// autonomous compiles) when not told: $XDG_STATE_HOME/intend, else
// ~/.local/state/intend, else data/server below the working directory.
func DefaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "intend")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "intend")
	}
	return filepath.Join("data", "server")
}

// registerCompiles registers the autonomous compile's workflows and
// activities on the orchestration worker.
func (s *Server) registerCompiles(w worker.Registry) {
	workflows.RegisterCompile(w)
	acts := &activities.Compiler{
		Store: s.store, DataDir: s.cfg.DataDir, AllowLocalRepos: s.cfg.AllowLocalRepos, FetchHosts: s.fetchHosts, Log: s.log,
		Wake: func(ctx context.Context, env store.Environment, reason string) error {
			return s.sched.Wake(ctx, env, reason, true, false)
		},
		ModelChanged: s.lsm.ModelChanged,
		Runner:       s.compiles, CompileTimeout: s.cfg.CompileTimeout,
	}
	acts.Register(w)
}

// reconcileCompiles makes sure the compile queue runs for every
// environment that has a compile queued or running (a wake-up lost in a
// crash, a queue lost with Temporal's store) or a recompile_interval. A
// queue with a compile queued and none running is woken (it may have
// missed the request, asleep on its timer); the others are only started
// if missing, which adds nothing to a running queue's history.
func (s *Server) reconcileCompiles(ctx context.Context) {
	qs, err := s.store.CompileQueues(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reconcile: compile queues", "error", err)
		}
		return
	}
	for _, q := range qs {
		if q.Waiting {
			err = s.sched.WakeCompiles(ctx, q.Environment, "reconciler: a compile is queued")
		} else {
			err = s.sched.EnsureCompiles(ctx, q.Environment)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("reconcile: compile queue", "environment", q.Environment.Name, "error", err)
		}
	}
}
