package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// A service instance's dry-run (docs/lsm.md, "Dry-run of an update"):
// what an update would do, shown without doing it. The proposed set is
// checked as the update would be (modifiers), validated as its transfer
// would be (the model with the inventory), rendered as its export would
// be, compared with the set in the released version (per resource, per
// attribute), and dry-run on the targets by the executors (what the
// adapters would change there). Nothing is written but the dry-run's
// run and its records.

// LSMPreviewer validates and renders a service instance's proposed
// attributes without changing anything.
type LSMPreviewer interface {
	// PreviewInstance validates attrs (the r attributes left out) for the
	// instance as an update's validation would, and, when that passes,
	// renders the instance's set from them as its export would. Its
	// compiles are bounded in time and memory like every other.
	PreviewInstance(ctx context.Context, envID, entity, instanceID string, version int, attrs map[string]any) (lsm.InstancePreview, error)
}

// MaxDryrunWait bounds ?wait= of an instance's dry-run.
const MaxDryrunWait = time.Minute

// instanceDryrunRequest is POST .../{id}/dryrun: the attributes to change
// (as PATCH /lsm/v1 takes them) or dict-path edits (as PATCH /lsm/v2),
// not both; neither dry-runs the current set as it is.
type instanceDryrunRequest struct {
	CurrentVersion *int64         `json:"current_version"`
	Attributes     map[string]any `json:"attributes"`
	Edit           []instanceEdit `json:"edit"`
}

// instanceDryrunValidation is the validation's verdict.
type instanceDryrunValidation = client.DryrunValidation

// instanceDryrunResponse is the answer: the update as it would be taken,
// its validation, the desired-state diff and the dry-run on the targets.
type instanceDryrunResponse = client.InstanceDryrunReport

// dryrunInstance answers POST /lsm/v1/service_inventory/{entity}/{id}/dryrun.
// ?wait=30s waits (at most MaxDryrunWait) for the dry-run on the targets
// and includes its results.
func (s *Server) dryrunInstance(w http.ResponseWriter, r *http.Request) error {
	if s.opts.LSMPreview == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	wait, err := queryDuration(r, "wait", MaxDryrunWait)
	if err != nil {
		return err
	}
	body, err := ReadBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var req instanceDryrunRequest
	if len(body) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
	}
	if req.Attributes != nil && req.Edit != nil {
		return InvalidField("/edit", "give attributes or edit, not both")
	}
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	entity, err := s.opts.Store.GetEntity(r.Context(), e.ID, inst.Entity)
	if err != nil {
		return err
	}
	// The proposal is of the version of the set it edits.
	if v := inst.CurrentVersion(); v != lsm.EntityVersion(entity.Version) {
		if entity.Entity, err = s.opts.Store.EntityAt(r.Context(), e.ID, inst.Entity, v); err != nil {
			return err
		}
	}
	if inst.Deleted {
		return Conflict("service instance %s is %s: it takes no more requests", inst.ID, inst.State)
	}
	if req.CurrentVersion != nil && *req.CurrentVersion != inst.Version {
		return rejectionProblem(nil, lsm.Request{Op: lsm.OpUpdate, InstanceID: inst.ID, CurrentVersion: *req.CurrentVersion},
			&lsm.Rejection{Reason: lsm.RejectStale, Version: inst.Version})
	}
	current := inst.Current()
	next := make(map[string]any, len(current)+len(req.Attributes))
	for k, v := range current {
		next[k] = v
	}
	for k, v := range req.Attributes {
		next[k] = v
	}
	if len(req.Edit) > 0 {
		if next, err = applyEdits(current, req.Edit); err != nil {
			return err
		}
	}
	if err := lsm.CheckUpdate(entity.Attributes, current, next); err != nil {
		return invalidAttributes(err)
	}
	noteAudit(r, map[string]any{"entity": entity.Name, "instance": inst.ID})

	out := instanceDryrunResponse{ServiceEntity: entity.Name, ID: inst.ID, Version: inst.Version, State: inst.State,
		CandidateAttributes: next}
	if _, err := entity.Lifecycle.Next(inst.State, lsm.Event{Trigger: lsm.OnUpdate}); err == nil {
		out.UpdateAllowed = true
	} else {
		for _, ev := range entity.Lifecycle.Allowed(inst.State) {
			out.Allowed = append(out.Allowed, ev.String())
		}
	}
	// The proposal is of the version of the set an update edits.
	pv, err := s.opts.LSMPreview.PreviewInstance(r.Context(), e.ID, entity.Name, inst.ID, inst.CurrentVersion(),
		lsm.WithoutReadOnly(entity.Attributes, next))
	if err != nil {
		return err
	}
	out.Validation = instanceDryrunValidation{OK: pv.OK, Errors: pv.Errors}
	if !pv.OK {
		WriteJSON(w, http.StatusOK, out)
		return nil
	}
	if len(pv.ReadOnly) > 0 {
		out.CandidateAttributes = withValues(next, pv.ReadOnly)
	}
	if pv.RenderErrors != nil {
		out.RenderErrors = pv.RenderErrors
		WriteJSON(w, http.StatusOK, out)
		return nil
	}
	reason := fmt.Sprintf("dry-run of service instance %s %s (version %d)", entity.Name, inst.ID, inst.Version)
	d, err := s.opts.Store.CreateInstanceDryrun(r.Context(), e.ID, instanceSet(inst), pv.Resources, reason)
	if errors.Is(err, store.ErrBusy) {
		w.Header().Set("Retry-After", "5")
		return TooManyRequests("%s; wait for one to finish", err.Error())
	}
	if err != nil {
		return err
	}
	desired := wireInstanceDryrun(d)
	out.DesiredState = &desired
	if d.Run != nil {
		out.Dryrun = desired.Run
		out.DryrunURL = "/api/v1/environments/" + url.PathEscape(e.Name) + "/dryrun/" + strconv.FormatInt(d.Run.Run, 10)
		if s.opts.Dryruns != nil {
			if err := s.opts.Dryruns.StartDryrun(r.Context(), e, *d.Run); err != nil {
				s.log.ErrorContext(r.Context(), "dry-run not started", "environment", e.Name, "run", d.Run.Run, "error", err)
				if ferr := s.opts.Store.FailRun(r.Context(), e.ID, d.Run.Run); ferr != nil {
					s.log.ErrorContext(r.Context(), "mark dry-run failed", "environment", e.Name, "run", d.Run.Run, "error", ferr)
				}
				return Unavailable("the dry-run could not be started (is Temporal up?); try again")
			}
		}
		if wait > 0 {
			run, res, err := s.awaitDryrun(r.Context(), e.ID, d.Run.Run, wait, outputsFor(r, e))
			if err != nil {
				return err
			}
			wrun := wireDeployRun(run)
			out.Dryrun = &wrun
			out.Targets = wireSlice(res, wireDryrunResult)
		}
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// awaitDryrun waits up to wait for a dry-run to end and returns it with
// its results (nil while it runs), their sensitive outputs as outputs says.
func (s *Server) awaitDryrun(ctx context.Context, envID string, run int64, wait time.Duration,
	outputs store.Outputs) (store.DeployRun, []store.DryrunResult, error) {
	deadline := time.Now().Add(wait)
	delay := 20 * time.Millisecond
	for {
		dr, err := s.opts.Store.GetRun(ctx, envID, run)
		if err != nil {
			return dr, nil, err
		}
		if dr.Status != "pending" && dr.Status != "running" {
			res, err := s.opts.Store.DryrunResults(ctx, envID, dr.WorkflowID, "", 10000, outputs)
			return dr, nonNil(res), err
		}
		if time.Now().After(deadline) {
			return dr, nil, nil
		}
		select {
		case <-ctx.Done():
			return dr, nil, ctx.Err()
		case <-time.After(min(delay, time.Until(deadline))):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// invalidAttributes maps an *lsm.AttributeError to a 422 naming each
// attribute at fault.
func invalidAttributes(err error) error {
	var ae *lsm.AttributeError
	if !errors.As(err, &ae) {
		return Validation(err.Error())
	}
	return Validation(ae.Error(), attributeErrors("/attributes/", ae.Problems)...)
}

// withValues is attrs (not changed) with vals written over it.
func withValues(attrs, vals map[string]any) map[string]any {
	out := make(map[string]any, len(attrs)+len(vals))
	for k, v := range attrs {
		out[k] = v
	}
	for k, v := range vals {
		out[k] = v
	}
	return out
}

// queryDuration reads an optional duration parameter (Go syntax, or
// whole seconds), at most max.
func queryDuration(r *http.Request, name string, max time.Duration) (time.Duration, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		n, nerr := strconv.Atoi(raw)
		if nerr != nil {
			return 0, BadRequest("%s=%q is not a duration (say 30s)", name, raw)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > max {
		return 0, BadRequest("%s=%q must be between 0 and %s", name, raw, max)
	}
	return d, nil
}
