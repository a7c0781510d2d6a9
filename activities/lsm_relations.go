package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// Relations between instances (issue 14, B.6; docs/architecture.md,
// "Relations between instances"): the store keeps who references whom
// and refuses what would break it; the activities map its refusals to
// the workflow's rejection types, give each compiled referrer the active
// attributes of what it references (compiler Options.Related), and tell
// the referrers when those change.

// referenceError maps the store's refusals of a transfer for its
// references: deleting a referenced instance (ErrTypeReferenced, with the
// referrers) and a reference to no live instance (ErrTypeInvalid, with
// the attribute problems). Both are final. Other errors give nil.
func referenceError(err error) error {
	var re *store.ReferencedError
	if errors.As(err, &re) {
		return temporal.NewNonRetryableApplicationError(re.Error(), lsm.RejectReferenced, nil, re.Referrers)
	}
	if ae, ok := store.IsAttributeError(err); ok {
		return temporal.NewNonRetryableApplicationError(ae.Error(), lsm.RejectInvalid, nil, ae.Problems)
	}
	return nil
}

// changesActive reports whether a transfer may have changed the
// instance's active set: its operations promote, roll back or clear it,
// or an expert forced the sets.
func changesActive(ev workflows.TransferEvent) bool {
	if ev.Trigger == "expert" {
		return true
	}
	return slices.ContainsFunc(ev.Operations, func(op lsm.Operation) bool {
		return op == lsm.Promote || op == lsm.Rollback || op == lsm.ClearActive
	})
}

// notifyReferrers tells the workflows of the instances that reference
// the one a transfer changed, when the transfer may have changed its
// active set, so that they export their resources again, built with the
// new attributes (ModelChangedSignal, the mechanism of a new model
// source). It runs after the transfer is committed, so their exports read
// the new set; a retry (the transfer found written) signals again, which
// is harmless.
func (l *LSM) notifyReferrers(ctx context.Context, in workflows.ApplyTransferInput) error {
	if l.Signal == nil || !changesActive(in.Event) {
		return nil
	}
	rs, err := l.Store.ReferencedBy(ctx, in.EnvironmentID, in.InstanceID)
	if err != nil || len(rs) == 0 {
		return classifyOrNil(err)
	}
	env, err := l.Store.GetEnvironment(ctx, in.EnvironmentID)
	if err != nil {
		return classify(err)
	}
	done := map[string]bool{}
	for _, r := range rs {
		if done[r.ID] {
			continue
		}
		done[r.ID] = true
		id := workflows.ServiceInstanceWorkflowID(env.Name, r.Entity, r.ID)
		if err := l.Signal(ctx, id, workflows.ModelChangedSignal, "referenced:"+in.InstanceID); err != nil {
			return fmt.Errorf("signal %s: %w", id, err)
		}
	}
	l.log().Info("referrers told of a changed instance", "environment", env.Name, "service_entity", in.Entity,
		"service_instance", in.InstanceID, "version", in.Version, "referrers", len(done))
	return nil
}

func classifyOrNil(err error) error {
	if err == nil {
		return nil
	}
	return classify(err)
}

// resolver resolves references to live instances.
type resolver func(ctx context.Context, refs []lsm.Reference) ([]store.ResolvedReference, error)

// storeResolver resolves in PostgreSQL.
func (l *LSM) storeResolver(envID string) resolver {
	return func(ctx context.Context, refs []lsm.Reference) ([]store.ResolvedReference, error) {
		return l.Store.ResolveReferences(ctx, envID, refs)
	}
}

// liveResolver resolves among live, the instances a validation read: by
// id, or by identity among those not deleted, leaving out those in a
// state that purges.
func liveResolver(live []store.ServiceInstance, lifecycles map[string]lsm.Lifecycle) resolver {
	byEntity := map[string][]store.ServiceInstance{}
	for _, inst := range live {
		if inst.Deleted || lifecycles[inst.Entity].States[inst.State].Purge {
			continue
		}
		byEntity[inst.Entity] = append(byEntity[inst.Entity], inst)
	}
	return func(_ context.Context, refs []lsm.Reference) ([]store.ResolvedReference, error) {
		out := make([]store.ResolvedReference, len(refs))
		for i, r := range refs {
			out[i].Reference = r
			for _, inst := range byEntity[r.Entity] {
				if inst.ID == strings.ToLower(r.Value) || (inst.Identity != "" && inst.Identity == r.Value) {
					out[i].ID, out[i].Active, out[i].State = inst.ID, inst.Active, inst.State
					break
				}
			}
		}
		return out, nil
	}
}

// related is the value of an instance's related field, built from attrs
// (nil when the entity has no references or attrs none), and the problems
// that keep it from being built: a reference to no live instance, or to
// one without an active set (not validated yet).
func related(ctx context.Context, resolve resolver, specs []lsm.AttributeSpec, attrs map[string]any) (json.RawMessage, []string, error) {
	refs := lsm.References(specs, attrs)
	if len(refs) == 0 && !hasReferenceValue(specs, attrs) {
		return nil, nil, nil
	}
	resolved, err := resolve(ctx, refs)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]any{}
	var problems []string
	for _, spec := range specs {
		if list, ok := attrs[spec.Name].([]any); ok && spec.References != "" {
			out[spec.Name] = make([]any, 0, len(list))
		}
	}
	for _, r := range resolved {
		var active any
		switch {
		case r.ID == "":
			problems = append(problems, fmt.Sprintf("attribute %s: names no live %s instance (%q)", r.Attribute, r.Entity, r.Value))
			continue
		case len(r.Active) == 0:
			problems = append(problems, fmt.Sprintf("attribute %s: the %s instance %q (%s) has no active attributes yet "+
				"(state %s): it must be validated and promoted before an instance that references it",
				r.Attribute, r.Entity, r.Value, r.ID, r.State))
			continue
		default:
			active = r.Active
		}
		if list, ok := out[r.Attribute].([]any); ok {
			out[r.Attribute] = append(list, active)
		} else {
			out[r.Attribute] = active
		}
	}
	if len(problems) > 0 {
		return nil, problems, nil
	}
	b, err := json.Marshal(out)
	return b, nil, err
}

// hasReferenceValue reports whether attrs holds a reference attribute
// (an empty list of references still makes an empty list in related).
func hasReferenceValue(specs []lsm.AttributeSpec, attrs map[string]any) bool {
	return slices.ContainsFunc(specs, func(s lsm.AttributeSpec) bool {
		_, ok := attrs[s.Name]
		return ok && s.References != ""
	})
}

// relatedErrors are an instance's reference problems as compile errors
// of the instance.
func relatedErrors(entity, id string, problems []string) compiler.Errors {
	errs := make(compiler.Errors, len(problems))
	for i, p := range problems {
		errs[i] = &compiler.Error{Instance: instanceLabel(entity, id), Path: "related", Message: p}
	}
	return errs
}

// addRelated sets related[entity][id] when rel is not nil.
func addRelated(related map[string]map[string]json.RawMessage, entity, id string, rel json.RawMessage) {
	if rel == nil {
		return
	}
	if related[entity] == nil {
		related[entity] = map[string]json.RawMessage{}
	}
	related[entity][id] = rel
}

// instanceRelated is the related field of one instance, read from
// PostgreSQL (exports and previews compile the instance alone).
func (l *LSM) instanceRelated(ctx context.Context, envID, entity, id string, attrs map[string]any) (map[string]map[string]json.RawMessage, compiler.Errors, error) {
	specs, err := l.Store.EntityAttributes(ctx, envID, entity)
	if err != nil {
		return nil, nil, classify(err)
	}
	if !lsm.HasReferences(specs) {
		return nil, nil, nil
	}
	rel, problems, err := related(ctx, l.storeResolver(envID), specs, attrs)
	if err != nil {
		return nil, nil, classify(err)
	}
	if len(problems) > 0 {
		return nil, relatedErrors(entity, id, problems), nil
	}
	out := map[string]map[string]json.RawMessage{}
	addRelated(out, entity, id, rel)
	return out, nil, nil
}
