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
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// A service instance's dry-run (docs/lsm.md, "Dry-run of an update" and
// "Dry-run of every write"): what a write would do, shown without doing
// it. The write is judged by lsm.Decide, as the instance's workflow
// judges it, on the instance PostgreSQL holds (lsm_dryrun_writes.go). The proposed set is
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

// instanceDryrunRequest is POST .../{id}/dryrun: the write to dry-run
// (operation, default update) and what that write takes. An update's
// attributes to change (as PATCH /lsm/v1 takes them) or dict-path edits
// (as PATCH /lsm/v2), not both; neither dry-runs the current set as it
// is. A set_state's target_state; a rollback's to_version.
type instanceDryrunRequest struct {
	Operation      string         `json:"operation"`
	CurrentVersion *int64         `json:"current_version"`
	Attributes     map[string]any `json:"attributes"`
	Edit           []instanceEdit `json:"edit"`
	TargetState    string         `json:"target_state"`
	ToVersion      *int64         `json:"to_version"`
}

// opRollback is the dry-run of POST .../{id}/rollback, sent as an update.
const opRollback = "rollback"

// check refuses what the operation does not take, and what it needs and
// lacks.
func (req *instanceDryrunRequest) check() error {
	if req.Operation == "" {
		req.Operation = lsm.OpUpdate
	}
	switch req.Operation {
	case lsm.OpUpdate, lsm.OpDelete, lsm.OpSetState, opRollback:
	default:
		return InvalidField("/operation", "must be update, delete, set_state or rollback (a create's dry-run is POST .../service_inventory/{entity}/dryrun)")
	}
	if req.Attributes != nil && req.Edit != nil {
		return InvalidField("/edit", "give attributes or edit, not both")
	}
	if req.Operation != lsm.OpUpdate {
		if req.Attributes != nil {
			return InvalidField("/attributes", "only an update takes attributes")
		}
		if req.Edit != nil {
			return InvalidField("/edit", "only an update takes edits")
		}
	}
	switch {
	case req.Operation == lsm.OpSetState && req.TargetState == "":
		return InvalidField("/target_state", "required: the state to go to")
	case req.Operation != lsm.OpSetState && req.TargetState != "":
		return InvalidField("/target_state", "only a set_state takes a target state")
	case req.Operation == opRollback && (req.ToVersion == nil || *req.ToVersion < 1):
		return InvalidField("/to_version", "required: the instance version whose attributes to restore (a positive whole number)")
	case req.Operation != opRollback && req.ToVersion != nil:
		return InvalidField("/to_version", "only a rollback takes to_version")
	}
	return nil
}

// instanceDryrunValidation is the validation's verdict.
type instanceDryrunValidation = client.DryrunValidation

// instanceDryrunResponse is the answer: the write as it would be taken,
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
	if err := req.check(); err != nil {
		return err
	}
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	entity, err := s.opts.Store.GetEntityDefinition(r.Context(), e.ID, inst.Entity)
	if err != nil {
		return err
	}
	subj, err := s.dryrunSubject(r, e.ID, entity, inst)
	if err != nil {
		return err
	}
	if inst.Deleted {
		return Conflict("service instance %s is %s: it takes no more requests", inst.ID, inst.State)
	}
	// The write is judged against the version the client names (the
	// instance's own when it names none).
	version := inst.Version
	if req.CurrentVersion != nil {
		version = *req.CurrentVersion
	}
	if version != inst.Version {
		return rejectionProblem(nil, lsm.Request{Op: req.Operation, InstanceID: inst.ID, CurrentVersion: version},
			&lsm.Rejection{Reason: lsm.RejectStale, Version: inst.Version})
	}
	out := instanceDryrunResponse{ServiceEntity: entity.Name, ID: inst.ID, Version: inst.Version, State: inst.State,
		Operation: req.Operation}
	if _, err := entity.Lifecycle.Next(inst.State, lsm.Event{Trigger: lsm.OnUpdate}); err == nil {
		out.UpdateAllowed = true
	} else {
		for _, ev := range entity.Lifecycle.Allowed(inst.State) {
			out.Allowed = append(out.Allowed, ev.String())
		}
	}
	if req.Operation == lsm.OpDelete || req.Operation == lsm.OpSetState {
		return s.dryrunTransfer(w, r, e, subj, lsm.Request{Op: req.Operation, InstanceID: inst.ID, CurrentVersion: version,
			Target: req.TargetState}, wait, out)
	}

	current := inst.Current()
	var next map[string]any
	switch {
	case req.Operation == opRollback:
		if next, err = s.rolledBack(r, e.ID, entity.Attributes, inst, *req.ToVersion); err != nil {
			return err
		}
	case len(req.Edit) > 0:
		if next, err = applyEdits(current, req.Edit); err != nil {
			return err
		}
	default:
		next = lsm.MergeAttributes(current, req.Attributes)
	}
	if req.Operation == lsm.OpUpdate {
		if err := s.checkReferences(r.Context(), e.ID, entity.Attributes, lsm.ChangedAttributes(current, next), "/attributes/"); err != nil {
			return err
		}
	}
	// Judged as the write's update would be. An update the state takes
	// none of still shows what it would do (update_allowed false, as
	// before there were other operations); a rollback's is the write's 409.
	lreq := lsm.Request{Op: lsm.OpUpdate, InstanceID: inst.ID, CurrentVersion: version, Attributes: next}
	d, rej := lsm.Decide(subj, lreq)
	switch {
	case rej == nil:
		out.Transfer, out.ResultingState, out.ExportMode = dryrunTransferOf(d.Transfer, &entity.Lifecycle)
	case rej.Reason == lsm.RejectIllegal && req.Operation == lsm.OpUpdate:
		if err := lsm.CheckUpdate(subj.Attributes, current, next); err != nil {
			return invalidAttributes(err)
		}
	default:
		return rejectionProblem(w, lreq, rej)
	}
	noteAudit(r, map[string]any{"entity": entity.Name, "instance": inst.ID, "op": req.Operation})
	out.CandidateAttributes = next
	// The proposal is of the version of the set an update edits.
	rs, done, err := s.previewSet(r, e.ID, entity.Name, inst.ID, inst.CurrentVersion(), subj.Attributes, next, &out)
	if err != nil || done {
		if err == nil {
			WriteJSON(w, http.StatusOK, out)
		}
		return err
	}
	return s.dryrunResources(w, r, e, instanceSet(inst), rs, wait, out)
}

// previewSet validates attrs (of the entity version version, whose
// attributes are specs) and renders them as the instance's set, writing
// the verdict and the candidate set with its computed r attributes into
// out; done: the validation or the render failed, out is the answer.
func (s *Server) previewSet(r *http.Request, envID, entity, id string, version int, specs []lsm.AttributeSpec,
	attrs map[string]any, out *instanceDryrunResponse) (rs []intent.Resource, done bool, err error) {
	pv, err := s.opts.LSMPreview.PreviewInstance(r.Context(), envID, entity, id, version, lsm.WithoutReadOnly(specs, attrs))
	if err != nil {
		return nil, false, err
	}
	out.Validation = instanceDryrunValidation{OK: pv.OK, Errors: pv.Errors}
	if !pv.OK {
		return nil, true, nil
	}
	if len(pv.ReadOnly) > 0 {
		out.CandidateAttributes = withValues(attrs, pv.ReadOnly)
	}
	if pv.RenderErrors != nil {
		out.RenderErrors = pv.RenderErrors
		return nil, true, nil
	}
	return pv.Resources, false, nil
}

// dryrunResources compares rs, what the set would hold, with the set in
// the released version and dry-runs rs on the targets (none: the set
// would be removed; no dry-run), then writes out.
func (s *Server) dryrunResources(w http.ResponseWriter, r *http.Request, e store.Environment, set string,
	rs []intent.Resource, wait time.Duration, out instanceDryrunResponse) error {
	reason := fmt.Sprintf("dry-run of service instance %s %s (version %d)", out.ServiceEntity, out.ID, out.Version)
	if out.Operation != lsm.OpUpdate {
		reason = fmt.Sprintf("dry-run of the %s of service instance %s %s (version %d)", out.Operation, out.ServiceEntity, out.ID, out.Version)
	}
	d, err := s.opts.Store.CreateInstanceDryrun(r.Context(), e.ID, set, rs, reason)
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
