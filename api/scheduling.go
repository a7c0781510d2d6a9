package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/store"
)

type deployRequest struct {
	// Mode is "incremental" (deploy what is not compliant) or "full"
	// (repair: re-verify everything in scope).
	Mode        string   `json:"mode"`
	Agents      []string `json:"agents"`
	ResourceIDs []string `json:"resource_ids"`
}

// deploy queues a user deploy or repair and wakes the scheduler: 202 with
// the request, whose run appears once the scheduler takes it.
func (s *Server) deploy(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	var req deployRequest
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	q := store.Request{Agents: req.Agents, ResourceIDs: req.ResourceIDs}
	switch req.Mode {
	case "incremental", "":
		q.Kind, q.Reason = "deploy", "user deploy"
	case "full":
		now := time.Now()
		q.Kind, q.Reason, q.StaleBefore = "repair", "user repair", &now
	default:
		return InvalidField("/mode", `must be "incremental" (retry what is not compliant) or "full" (repair everything)`)
	}
	out, err := s.opts.Store.RequestDeploy(r.Context(), e.ID, q)
	if err != nil {
		return err
	}
	s.wake(r, e, out.Reason, false, false)
	WriteJSON(w, http.StatusAccepted, out)
	return nil
}

func (s *Server) getRequest(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "request"), 10, 64)
	if err != nil || id < 1 {
		return BadRequest("request %q is not a positive whole number", chi.URLParam(r, "request"))
	}
	out, err := s.opts.Store.GetRequest(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// setHalted serves POST .../halt and .../resume.
func (s *Server) setHalted(halted bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := s.env(r)
		if err != nil {
			return err
		}
		out, err := s.opts.Store.SetHalted(r.Context(), e.ID, halted)
		if err != nil {
			return err
		}
		reason := "environment resumed"
		if halted {
			reason = "environment halted"
		}
		s.wake(r, out, reason, false, halted)
		WriteJSON(w, http.StatusOK, out)
		return nil
	}
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	as, err := s.opts.Store.ListAgents(r.Context(), e.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, list[store.Agent]{Items: nonNil(as)})
	return nil
}

// setPaused serves POST .../agents/{agent}/pause and .../unpause.
func (s *Server) setPaused(paused bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := s.env(r)
		if err != nil {
			return err
		}
		agent, err := pathParam(chi.URLParam(r, "agent"))
		if err != nil {
			return err
		}
		if err := s.opts.Store.SetAgentPaused(r.Context(), e.ID, agent, paused); err != nil {
			return err
		}
		if !paused {
			s.wake(r, e, "agent "+agent+" unpaused", false, false)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
