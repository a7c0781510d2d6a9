package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// The dry-run of every write (docs/lsm.md, "Dry-run of every write"): a
// create, a delete, a set-state and a rollback, besides the update. Each
// is judged by lsm.Decide on the instance PostgreSQL holds, as the
// instance's workflow judges the write, so that a dry-run refuses what
// the write would refuse, with the write's problem, and otherwise shows
// the transfer, the state it leads to and what happens to the instance's
// resources: rendered as its export would make them, compared with the
// released version and dry-run on the targets. Nothing is written but
// the dry-run's run and its records.

// The export modes of a state (client.InstanceDryrunReport.ExportMode),
// as the instance's workflow exports in it.
const (
	exportResources = "export"
	exportPurge     = "purge"
	exportRemove    = "remove"
	exportNone      = "none"
)

// exportModeOf is what state does with an instance's resources.
func exportModeOf(l *lsm.Lifecycle, state string) string {
	st := l.States[state]
	switch {
	case st.Terminal:
		return exportRemove
	case st.Purge:
		return exportPurge
	case st.Export:
		return exportResources
	}
	return exportNone
}

// dryrunSubject is inst as lsm.Decide judges a write against it, as its
// workflow would: nobody applying a transfer (PostgreSQL cannot tell), the
// entity's lifecycle and auto-transfer switches (the entity's and the
// instance's own config), the attributes of the
// entity version its current set is of.
func (s *Server) dryrunSubject(r *http.Request, envID string, entity store.ServiceEntity, inst store.ServiceInstance) (lsm.Subject, error) {
	attrs := entity.Attributes
	if v := inst.CurrentVersion(); v != lsm.EntityVersion(entity.Version) {
		at, err := s.opts.Store.EntityAt(r.Context(), envID, inst.Entity, v)
		if err != nil {
			return lsm.Subject{}, err
		}
		attrs = at.Attributes
	}
	ic, err := s.opts.Store.InstanceConfig(r.Context(), envID, inst.ID)
	if err != nil {
		return lsm.Subject{}, err
	}
	return lsm.Subject{ID: inst.ID, Version: inst.Version, State: inst.State, Sets: inst.Sets,
		Lifecycle: &entity.Lifecycle, Entity: entity.Entity, Attributes: attrs,
		Auto: entity.Config.Auto(ic)}, nil
}

// dryrunTransferOf reports t, the state it leads to and that state's
// export mode.
func dryrunTransferOf(t lsm.Transfer, l *lsm.Lifecycle) (*client.DryrunTransfer, string, string) {
	out := &client.DryrunTransfer{Trigger: string(t.Trigger), Source: t.Source, Target: t.Target, ErrorState: t.Error,
		Validates: t.Validate}
	for _, op := range t.TargetOperation {
		out.Operations = append(out.Operations, string(op))
	}
	return out, t.Target, exportModeOf(l, t.Target)
}

// dryrunTransfer dry-runs a delete or a set-state: refused as the write
// would be, else its transfer (validating the current set first when it
// validates: a failure leads to its error state) and the resources of
// the state it leads to: the active set after its operations exported,
// the same purged, or the set removed.
func (s *Server) dryrunTransfer(w http.ResponseWriter, r *http.Request, e store.Environment, subj lsm.Subject,
	req lsm.Request, wait time.Duration, out instanceDryrunResponse) error {
	d, rej := lsm.Decide(subj, req)
	if rej != nil {
		return rejectionProblem(w, req, rej)
	}
	noteAudit(r, map[string]any{"entity": subj.Entity.Name, "instance": subj.ID, "op": req.Op})
	t := d.Transfer
	out.Transfer, out.ResultingState, out.ExportMode = dryrunTransferOf(t, subj.Lifecycle)
	out.Validation = instanceDryrunValidation{OK: true}
	sets := d.Sets
	if t.Validate {
		current := sets.Current()
		out.CandidateAttributes = current
		if _, done, err := s.previewSet(r, e.ID, subj.Entity.Name, subj.ID, sets.CurrentVersion(), subj.Attributes, current, &out); err != nil || done {
			if err == nil {
				if !out.Validation.OK {
					out.ResultingState, out.ExportMode = t.Error, exportModeOf(subj.Lifecycle, t.Error)
				}
				WriteJSON(w, http.StatusOK, out)
			}
			return err
		}
	}
	after := lsm.ApplyAll(t.TargetOperation, sets)
	out.CandidateAttributes = after.Active
	var rs []intent.Resource
	switch out.ExportMode {
	case exportNone:
		WriteJSON(w, http.StatusOK, out)
		return nil
	case exportResources, exportPurge:
		if after.Active == nil {
			break // nothing to build: the set is emptied, as the export would
		}
		specs := subj.Attributes
		if v := lsm.EntityVersion(after.ActiveVersion); v != sets.CurrentVersion() {
			at, err := s.opts.Store.EntityAt(r.Context(), e.ID, subj.Entity.Name, v)
			if err != nil {
				return err
			}
			specs = at.Attributes
		}
		var done bool
		var err error
		rs, done, err = s.previewSet(r, e.ID, subj.Entity.Name, subj.ID, lsm.EntityVersion(after.ActiveVersion), specs, after.Active, &out)
		if err != nil || done {
			if err == nil {
				WriteJSON(w, http.StatusOK, out)
			}
			return err
		}
		if out.ExportMode == exportPurge {
			for i := range rs {
				rs[i].Purged = true
			}
		}
	}
	return s.dryrunResources(w, r, e, subj.Entity.Name+"/"+subj.ID, rs, wait, out)
}

// dryrunCreate answers POST /lsm/v1/service_inventory/{entity}/dryrun:
// the create's body; refused as the create would be, else the create's
// transfer and its candidate set (with the defaults) validated, rendered
// and dry-run on the targets. Without service_instance_id the set is
// rendered for a fresh id (as the create would pick one).
func (s *Server) dryrunCreate(w http.ResponseWriter, r *http.Request) error {
	if s.opts.LSMPreview == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	wait, err := queryDuration(r, "wait", MaxDryrunWait)
	if err != nil {
		return err
	}
	var lw lsmWrite
	var name string
	if lw.env, name, err = s.lsmEntityParam(r); err != nil {
		return err
	}
	if lw.entity, err = s.opts.Store.GetEntityDefinition(r.Context(), lw.env.ID, name); err != nil {
		return err
	}
	if lw.body, err = ReadBody(r, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	var req createInstanceRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	id, err := s.prepareCreate(r, &lw, &req)
	if err != nil {
		return err
	}
	subj := lsm.Subject{ID: id, Lifecycle: &lw.entity.Lifecycle, Entity: lw.entity.Entity,
		Auto: lw.entity.Config.Auto(store.DefaultInstanceConfig())}
	lreq := lsm.Request{Op: lsm.OpCreate, InstanceID: id, Attributes: req.Attributes, Target: req.InitialState}
	d, rej := lsm.Decide(subj, lreq)
	if rej != nil {
		return rejectionProblem(w, lreq, rej)
	}
	// A create beyond the environment's service_instance_quota: the
	// create's 409.
	if err := s.opts.Store.CheckInstanceQuota(r.Context(), lw.env.ID); err != nil {
		return err
	}
	// The values the create would be given from pools, taken by nothing
	// (an exhausted pool: the create's 409).
	cand := d.Sets.Candidate
	vals, err := s.opts.Store.PreviewAllocation(r.Context(), lw.env.ID, lw.entity.Name, d.Sets.CandidateVersion, cand)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"entity": lw.entity.Name, "instance": id, "op": lsm.OpCreate})
	out := instanceDryrunResponse{ServiceEntity: lw.entity.Name, ID: id, Operation: lsm.OpCreate}
	if len(vals) > 0 {
		picked := make(map[string]any, len(vals))
		for _, v := range vals {
			picked[v.Attribute] = v.Value
			out.Allocated = append(out.Allocated, client.DryrunAllocation{Attribute: v.Attribute, Pool: v.Pool, Value: v.Value,
				Detail: fmt.Sprintf("would be allocated from pool %s; another create may take it first", v.Pool)})
		}
		cand = withValues(cand, picked)
	}
	out.CandidateAttributes = cand
	out.Transfer, out.ResultingState, out.ExportMode = dryrunTransferOf(d.Transfer, subj.Lifecycle)
	rs, done, err := s.previewSet(r, lw.env.ID, lw.entity.Name, id, d.Sets.CandidateVersion, lw.entity.Attributes, cand, &out)
	if err != nil || done {
		if err == nil {
			WriteJSON(w, http.StatusOK, out)
		}
		return err
	}
	return s.dryrunResources(w, r, lw.env, lw.entity.Name+"/"+id, rs, wait, out)
}
