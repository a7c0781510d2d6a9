package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"

	"github.com/go-chi/chi/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/api"
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
		Store: s.store, DataDir: s.cfg.DataDir, Log: s.log,
		Wake: func(ctx context.Context, env store.Environment, reason string) error {
			return s.Wake(ctx, env, reason, true, false)
		},
		ModelChanged: s.lsm.ModelChanged,
	}
	acts.Register(w)
}

// mountCompiles adds the compile endpoints to the API's route tree (h,
// which api.Server.Handler returns).
func (s *Server) mountCompiles(h http.Handler) error {
	r, ok := h.(chi.Router)
	if !ok {
		return fmt.Errorf("the API handler is a %T, not a chi router: cannot add the compile routes", h)
	}
	r.Post("/api/v1/environments/{env}/compile", s.serveAPI(s.requestCompile))
	r.Get("/api/v1/environments/{env}/compiles", s.serveAPI(s.listCompiles))
	r.Get("/api/v1/environments/{env}/compiles/{compile}", s.serveAPI(s.getCompile))
	return nil
}

// serveAPI renders a handler's error as a problem, as the API does.
func (s *Server) serveAPI(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			api.WriteError(w, r, s.log, compileProblem(err))
		}
	}
}

// compileProblem turns the store's errors into problems.
func compileProblem(err error) error {
	var p *api.Problem
	switch {
	case errors.As(err, &p):
		return err
	case errors.Is(err, store.ErrNoRepository):
		return api.Validation("the environment has no repository to compile: set its repo_url setting",
			api.FieldError{Field: "/settings/repo_url", Detail: "is empty"})
	case errors.Is(err, store.ErrNotFound):
		return api.NotFound("%s", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return api.Unavailable("the request was cancelled or timed out")
	}
	return err
}

// compileEnv resolves the {env} path parameter (an id or a name).
func (s *Server) compileEnv(r *http.Request) (store.Environment, error) {
	return s.store.GetEnvironment(r.Context(), chi.URLParam(r, "env"))
}

// requestCompile serves POST .../compile: queue a compile of the
// environment's branch (or merge into the queued one) and wake the
// environment's compile queue. The body, if any, must be {}.
func (s *Server) requestCompile(w http.ResponseWriter, r *http.Request) error {
	e, err := s.compileEnv(r)
	if err != nil {
		return err
	}
	if r.ContentLength != 0 {
		var none struct{}
		if err := api.Decode(r, &none, api.DefaultMaxBodyBytes); err != nil {
			return err
		}
	}
	c, merged, err := s.store.RequestCompile(r.Context(), e.ID, "api")
	if err != nil {
		return err
	}
	if err := s.wakeCompiles(r.Context(), e, "compile requested"); err != nil {
		// The compile is queued; the reconciler starts the queue.
		s.log.Warn("compile queue not woken; the reconciler will", "environment", e.Name, "compile", c.ID, "error", err)
	}
	if merged {
		s.log.Info("compile request merged into the queued compile", "environment", e.Name, "compile", c.ID)
	}
	w.Header().Set("Location", "/api/v1/environments/"+e.Name+"/compiles/"+strconv.FormatInt(c.ID, 10))
	api.WriteJSON(w, http.StatusAccepted, c)
	return nil
}

// compileList is the list envelope.
type compileList struct {
	Items []store.Compile `json:"items"`
	Next  string          `json:"next,omitempty"`
}

// listCompiles serves GET .../compiles?limit=&before=, newest first.
func (s *Server) listCompiles(w http.ResponseWriter, r *http.Request) error {
	e, err := s.compileEnv(r)
	if err != nil {
		return err
	}
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return api.InvalidField("?limit", "must be a whole number from 1 to 1000")
		}
		limit = n
	}
	var before int64
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return api.InvalidField("?before", "must be a compile id (a positive whole number)")
		}
		before = n
	}
	cs, err := s.store.ListCompiles(r.Context(), e.ID, before, limit)
	if err != nil {
		return err
	}
	out := compileList{Items: cs}
	if out.Items == nil {
		out.Items = []store.Compile{}
	}
	if len(cs) == limit {
		out.Next = strconv.FormatInt(cs[len(cs)-1].ID, 10)
	}
	api.WriteJSON(w, http.StatusOK, out)
	return nil
}

// getCompile serves GET .../compiles/{compile}.
func (s *Server) getCompile(w http.ResponseWriter, r *http.Request) error {
	e, err := s.compileEnv(r)
	if err != nil {
		return err
	}
	raw := chi.URLParam(r, "compile")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		return api.BadRequest("compile %q is not a positive whole number", raw)
	}
	c, err := s.store.GetCompile(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) compileQueueOptions(env store.Environment) client.StartWorkflowOptions {
	return envWorkflowOptions(workflows.CompileQueueWorkflowID(env.Name), env, "compile queue of environment "+env.Name)
}

func compileQueueInput(env store.Environment) workflows.CompileQueueInput {
	return workflows.CompileQueueInput{EnvironmentID: env.ID, EnvironmentName: env.Name}
}

// wakeCompiles tells the environment's compile queue to look at its
// queue, starting it when it does not run.
func (s *Server) wakeCompiles(ctx context.Context, env store.Environment, reason string) error {
	_, err := s.temporal.SignalWithStartWorkflow(ctx, workflows.CompileQueueWorkflowID(env.Name), workflows.CompileSignal,
		workflows.CompileWake{Reason: reason}, s.compileQueueOptions(env), workflows.CompileQueueWorkflowName,
		compileQueueInput(env))
	if err != nil {
		return fmt.Errorf("wake compile queue of %s: %w", env.Name, err)
	}
	return nil
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
			err = s.wakeCompiles(ctx, q.Environment, "reconciler: a compile is queued")
		} else {
			_, err = s.temporal.ExecuteWorkflow(ctx, s.compileQueueOptions(q.Environment),
				workflows.CompileQueueWorkflowName, compileQueueInput(q.Environment))
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("reconcile: compile queue", "environment", q.Environment.Name, "error", err)
		}
	}
}
