package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// Relations between instances (docs/lsm.md, "Relations between
// instances"): who references an instance, the 409 of a delete that
// would leave a reference to nothing, and the 422 of a request whose
// reference names no live instance. The store enforces both refusals in
// the transfer's transaction; the checks here only answer sooner.

// InstanceReferrer is a live instance whose attribute references another
// one (client.InstanceReferrer).
type InstanceReferrer = client.InstanceReferrer

func referrerViews(rs []lsm.Referrer) []InstanceReferrer {
	out := make([]InstanceReferrer, len(rs))
	for i, r := range rs {
		out[i] = InstanceReferrer{ServiceEntity: r.Entity, ID: r.ID, Identity: r.Identity, Attribute: r.Attribute, State: r.State}
	}
	return out
}

// getReferencedBy lists the live instances that reference the instance,
// one item per (instance, attribute).
func (s *Server) getReferencedBy(w http.ResponseWriter, r *http.Request) error {
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	rs, err := s.opts.Store.ReferencedBy(r.Context(), e.ID, inst.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, client.List[InstanceReferrer]{Items: referrerViews(rs)})
	return nil
}

// checkReferences answers 422 when attrs reference no live instance of
// their entity, each such attribute at prefix and its name (the store
// refuses them again when the transfer is written).
func (s *Server) checkReferences(ctx context.Context, envID string, specs []lsm.AttributeSpec, attrs map[string]any, prefix string) error {
	refs := lsm.References(specs, attrs)
	if len(refs) == 0 {
		return nil
	}
	resolved, err := s.opts.Store.ResolveReferences(ctx, envID, refs)
	if err != nil {
		return err
	}
	var problems []lsm.AttributeProblem
	for _, r := range resolved {
		if r.ID == "" {
			problems = append(problems, store.NoSuchInstance(r.Reference))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return Validation(fmt.Sprintf("%d reference(s) name no live instance", len(problems)), attributeErrors(prefix, problems)...)
}

// referencedProblem is the 409 of a delete of an instance others
// reference: errors and referrers name each.
func referencedProblem(req lsm.Request, rej *lsm.Rejection) *Problem {
	p := Conflict("service instance %s is referenced by %d live instance(s): delete them first, or change their references",
		req.InstanceID, len(rej.Referrers))
	for _, r := range rej.Referrers {
		name := r.ID
		if r.Identity != "" {
			name = fmt.Sprintf("%s (%s)", r.Identity, r.ID)
		}
		p.Errors = append(p.Errors, FieldError{Field: "", Detail: fmt.Sprintf("referenced by %s %s, attribute %s (state %s)",
			r.Entity, name, r.Attribute, r.State)})
	}
	p.Referrers = referrerViews(rej.Referrers)
	return p
}
