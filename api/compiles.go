package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/store"
)

// Compiles reaches the environments' compile queues (autonomous mode):
// a requested compile is queued in PostgreSQL first; waking is how the
// queue hears of it at once (the server's reconciler starts a queue that
// was not woken).
type Compiles interface {
	WakeCompiles(ctx context.Context, env store.Environment, reason string) error
}

// requestCompile serves POST .../compile: queue a compile of the
// environment's branch (or merge into the queued one) and wake the
// environment's compile queue. The body, if any, must be {}.
func (s *Server) requestCompile(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if r.ContentLength != 0 {
		var none struct{}
		if err := Decode(r, &none, s.opts.MaxBodyBytes); err != nil {
			return err
		}
	}
	c, merged, err := s.opts.Store.RequestCompile(r.Context(), e.ID, "api")
	if err != nil {
		return err
	}
	if s.opts.Compiles != nil {
		if err := s.opts.Compiles.WakeCompiles(r.Context(), e, "compile requested"); err != nil {
			s.log.WarnContext(r.Context(), "compile queue not woken; the reconciler will", "environment", e.Name, "compile", c.ID, "error", err)
		}
	}
	if merged {
		s.log.InfoContext(r.Context(), "compile request merged into the queued compile", "environment", e.Name, "compile", c.ID)
	}
	noteAudit(r, map[string]any{"compile": c.ID, "merged": merged})
	w.Header().Set("Location", "/api/v1/environments/"+e.Name+"/compiles/"+strconv.FormatInt(c.ID, 10))
	WriteJSON(w, http.StatusAccepted, wireCompile(c))
	return nil
}

// listCompiles serves GET .../compiles?limit=&before=, newest first.
func (s *Server) listCompiles(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 50, 1, 1000)
	if err != nil {
		return err
	}
	var before int64
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return InvalidField("?before", "must be a compile id (a positive whole number)")
		}
		before = n
	}
	cs, err := s.opts.Store.ListCompiles(r.Context(), e.ID, before, limit)
	if err != nil {
		return err
	}
	writePage(w, cs, limit, func(c store.Compile) string { return strconv.FormatInt(c.ID, 10) }, wireCompile)
	return nil
}

// getCompile serves GET .../compiles/{compile}.
func (s *Server) getCompile(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	raw := chi.URLParam(r, "compile")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		return BadRequest("compile %q is not a positive whole number", raw)
	}
	c, err := s.opts.Store.GetCompile(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireCompile(c))
	return nil
}
