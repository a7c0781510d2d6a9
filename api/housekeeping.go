package api

import (
	"context"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
)

// Housekeeping an operator expects: projects read, renamed and deleted;
// environments cleared, decommissioned and protected; versions deleted.
// docs/operations.md ("Housekeeping") says what each keeps and refuses.

// project is the {project} of the path (an id or a name) as the caller
// may see it: a caller without a global role sees only the projects of
// its environments, and another one is "not found", worded as one that
// does not exist.
func (s *Server) project(r *http.Request) (store.Project, error) {
	ref, err := pathParam(chi.URLParam(r, "project"))
	if err != nil {
		return store.Project{}, err
	}
	p, err := s.opts.Store.GetProject(r.Context(), ref)
	if err != nil || principal(r).Global() != auth.RoleNone {
		return p, err
	}
	es, err := s.visibleEnvironments(r, p.ID)
	if err != nil {
		return p, err
	}
	if !slices.ContainsFunc(es, func(e store.Environment) bool { return e.ProjectID == p.ID }) {
		return store.Project{}, store.NotFound("project %q", ref)
	}
	return p, nil
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) error {
	p, err := s.project(r)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireProject(p))
	return nil
}

type projectPatch struct {
	Name *string `json:"name"`
}

func (s *Server) patchProject(w http.ResponseWriter, r *http.Request) error {
	p, err := s.project(r)
	if err != nil {
		return err
	}
	var req projectPatch
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	if req.Name == nil {
		return InvalidField("/name", "is required: the project's new name")
	}
	if err := store.ValidateName(*req.Name); err != nil {
		return InvalidField("/name", err.Error())
	}
	out, err := s.opts.Store.RenameProject(r.Context(), p.ID, *req.Name)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"from": p.Name, "to": out.Name})
	WriteJSON(w, http.StatusOK, wireProject(out))
	return nil
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) error {
	p, err := s.project(r)
	if err != nil {
		return err
	}
	if err := s.opts.Store.DeleteProject(r.Context(), p.ID); err != nil {
		return err
	}
	noteAudit(r, map[string]any{"project": p.Name})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refuseProtected refuses op on a protected environment before anything
// is stopped; the store checks again under the row lock.
func refuseProtected(e store.Environment, op string) error {
	if e.Protected {
		return &store.ProtectedError{Environment: e.Name, Operation: op}
	}
	return nil
}

// stopWorkflows terminates the environment's workflows (Scheduler.Stop).
func (s *Server) stopWorkflows(ctx context.Context, e store.Environment) error {
	if s.opts.Scheduler == nil {
		return nil
	}
	return s.opts.Scheduler.Stop(ctx, e)
}

// clear stops the environment's workflows, clears it, stops what started
// in between (an instance workflow whose request came just before the
// clear) and starts its scheduler again.
func (s *Server) clear(r *http.Request, e store.Environment) (store.Cleared, error) {
	ctx := r.Context()
	if err := s.stopWorkflows(ctx, e); err != nil {
		return store.Cleared{}, err
	}
	out, err := s.opts.Store.ClearEnvironment(ctx, e.ID)
	if err != nil {
		return out, err
	}
	if err := s.stopWorkflows(ctx, e); err != nil {
		s.log.WarnContext(ctx, "stop the workflows of a cleared environment again", "environment", e.Name, "error", err)
	}
	if s.opts.Scheduler != nil {
		if err := s.opts.Scheduler.Ensure(ctx, e); err != nil {
			s.log.WarnContext(ctx, "scheduler not started yet; the reconciler will start it", "environment", e.Name, "error", err)
		}
	}
	return out, nil
}

func (s *Server) clearEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if err := refuseProtected(e, "clear"); err != nil {
		return err
	}
	out, err := s.clear(r, e)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"versions": out.Versions, "resources": out.Resources, "service_instances": out.ServiceInstances})
	WriteJSON(w, http.StatusOK, client.Cleared(out))
	return nil
}

// decommissionEnvironment moves an environment's decommission one step:
// it starts it (stops every workflow, releases the version that purges
// everything: 202), reports its progress while the purge deploys (202),
// deploys the resources not purged yet again once the purge's run is
// over (202), and clears the environment once everything is purged
// (200). The CLI calls it until it answers 200.
func (s *Server) decommissionEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	if err := refuseProtected(e, "decommission"); err != nil {
		return err
	}
	ctx := r.Context()
	if e.DecommissionVersion == nil {
		if e.Halted {
			return Conflict("environment %s is halted: resume it first, so that the purge can deploy", e.Name)
		}
		if err := s.stopWorkflows(ctx, e); err != nil {
			return err
		}
		d, err := s.opts.Store.StartDecommission(ctx, e.ID)
		if err != nil {
			return err
		}
		if d.Version == 0 {
			return s.decommissioned(w, r, e)
		}
		noteAudit(r, map[string]any{"version": d.Version, "resources": d.Resources})
		s.wake(r, e, "decommission", true, false)
		WriteJSON(w, http.StatusAccepted, wireDecommission(d))
		return nil
	}
	d, ok, err := s.opts.Store.DecommissionProgress(ctx, e.ID)
	if err != nil {
		return err
	}
	if !ok {
		// Its purge is not the released version (never so while the
		// environment refuses other releases): say so, change nothing.
		return Conflict("environment %s is being decommissioned, but version %d, its purge, is not the released one",
			e.Name, *e.DecommissionVersion)
	}
	if d.Resources == d.Purged {
		return s.decommissioned(w, r, e)
	}
	if !d.Deploying {
		// The purge's run is over and left resources (failed, or not
		// tried: a paused agent): try them again.
		req, err := s.opts.Store.RequestDeploy(ctx, e.ID, store.Request{Kind: "deploy",
			Reason: "decommission: purge again what failed"})
		if err != nil {
			return err
		}
		d.Request, d.Deploying = &req, true
		s.wake(r, e, req.Reason, false, false)
	}
	WriteJSON(w, http.StatusAccepted, wireDecommission(d))
	return nil
}

// decommissioned clears the decommissioned environment and answers 200.
func (s *Server) decommissioned(w http.ResponseWriter, r *http.Request, e store.Environment) error {
	out, err := s.clear(r, e)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"cleared": true, "versions": out.Versions, "resources": out.Resources,
		"service_instances": out.ServiceInstances})
	c := client.Cleared(out)
	WriteJSON(w, http.StatusOK, client.Decommission{State: "cleared", Cleared: &c})
	return nil
}

func wireDecommission(d store.Decommission) client.Decommission {
	out := client.Decommission{State: d.State, Version: d.Version, Resources: d.Resources, Purged: d.Purged,
		Failed: d.Failed, FailedResources: d.FailedIDs, Deploying: d.Deploying}
	if d.Request != nil {
		req := wireRequest(*d.Request)
		out.Request = &req
	}
	return out
}

// setProtected protects an environment (its admin may) or lifts the
// protection (a global admin only: the route says so).
func (s *Server) setProtected(on bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := s.env(r)
		if err != nil {
			return err
		}
		out, err := s.opts.Store.SetProtected(r.Context(), e.ID, on)
		if err != nil {
			return err
		}
		WriteJSON(w, http.StatusOK, wireEnvironment(out))
		return nil
	}
}

func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request) error {
	e, v, err := s.envVersion(r)
	if err != nil {
		return err
	}
	if err := s.opts.Store.DeleteVersion(r.Context(), e.ID, v); err != nil {
		return err
	}
	noteAudit(r, map[string]any{"version": v})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
