package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/ledger"
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
		q.Kind, q.Reason = string(ledger.ActionDeploy), "user deploy"
	case "full":
		now := time.Now()
		q.Kind, q.Reason, q.StaleBefore = string(ledger.ActionRepair), "user repair", &now
	default:
		return InvalidField("/mode", `must be "incremental" (retry what is not compliant) or "full" (repair everything)`)
	}
	out, err := s.opts.Store.RequestDeploy(r.Context(), e.ID, q)
	if err != nil {
		return err
	}
	s.wake(r, e, out.Reason, false, false)
	WriteJSON(w, http.StatusAccepted, wireRequest(out))
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
	WriteJSON(w, http.StatusOK, wireRequest(out))
	return nil
}

// setHalted serves POST .../halt and .../resume.
func (s *Server) setHalted(halted bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := s.env(r)
		if err != nil {
			return err
		}
		out, rel, err := s.opts.Store.UpdateEnvironmentReleasing(r.Context(), e.ID, store.EnvironmentPatch{Halted: &halted})
		if err != nil {
			return err
		}
		reason := "environment resumed"
		if halted {
			reason = "environment halted"
		}
		s.wake(r, out, reason, false, halted)
		if !halted {
			s.resumed(r, out, rel)
		}
		WriteJSON(w, http.StatusOK, wireEnvironment(out))
		return nil
	}
}

// resumed takes a resumed environment's pipeline from where the halt held
// it: the release the resume made of a held version (rel, nil: none), and
// the announcement of a released model source the halt kept from the
// live service instances.
func (s *Server) resumed(r *http.Request, e store.Environment, rel *store.Release) {
	if rel != nil {
		s.released(r, e, *rel)
	}
	hash, err := s.opts.Store.UnannouncedModelOf(r.Context(), e.ID)
	if err != nil {
		s.log.WarnContext(r.Context(), "resume: the model source to announce could not be read; the reconciler retries",
			"environment", e.Name, "error", err)
		return
	}
	s.announce(r, e, hash)
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

type dryrunRequest struct {
	// Version to dry-run; 0 or absent: the released one.
	Version     int64    `json:"version"`
	Agents      []string `json:"agents"`
	ResourceIDs []string `json:"resource_ids"`
}

// createDryrun records a dry-run and starts its workflow: 202 with the run.
func (s *Server) createDryrun(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	var req dryrunRequest
	if r.ContentLength != 0 {
		if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
			return err
		}
	}
	if req.Version < 0 {
		return InvalidField("/version", "must be a version number (or absent for the released one)")
	}
	run, err := s.opts.Store.CreateDryrun(r.Context(), e.ID, req.Version, req.Agents, req.ResourceIDs)
	if errors.Is(err, store.ErrBusy) {
		w.Header().Set("Retry-After", "5")
		return TooManyRequests("%s; wait for one to finish", err.Error())
	}
	if err != nil {
		return err
	}
	if s.opts.Dryruns != nil {
		if err := s.opts.Dryruns.StartDryrun(r.Context(), e, run); err != nil {
			s.log.ErrorContext(r.Context(), "dry-run not started", "environment", e.Name, "run", run.Run, "error", err)
			if ferr := s.opts.Store.FailRun(r.Context(), e.ID, run.Run); ferr != nil {
				s.log.ErrorContext(r.Context(), "mark dry-run failed", "environment", e.Name, "run", run.Run, "error", ferr)
			}
			return Unavailable("the dry-run could not be started (is Temporal up?); try again")
		}
	}
	WriteJSON(w, http.StatusAccepted, wireDeployRun(run))
	return nil
}

// getDryrun returns a dry-run's progress and a page of its results.
func (s *Server) getDryrun(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "dryrun"), 10, 64)
	if err != nil || id < 1 {
		return BadRequest("dry-run %q is not a positive whole number", chi.URLParam(r, "dryrun"))
	}
	limit, err := queryInt(r, "limit", 1000, 1, 10000)
	if err != nil {
		return err
	}
	run, err := s.opts.Store.GetRun(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	if run.Action != string(ledger.ActionDryrun) {
		return NotFound("dry-run %d: run %d is a %s", id, id, run.Action)
	}
	res, err := s.opts.Store.DryrunResults(r.Context(), e.ID, run.WorkflowID, r.URL.Query().Get("after"), limit,
		outputsFor(r, e))
	if err != nil {
		return err
	}
	out := client.Dryrun{DeployRun: wireDeployRun(run), Results: wireAll(res, wireDryrunResult)}
	if len(res) == limit {
		out.Next = res[len(res)-1].ResourceID
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}
