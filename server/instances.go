package server

import (
	"context"
	"errors"
	"time"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// defaultInstanceReconcileEvery is how often the reconciler looks for live
// service instances whose workflow does not run.
const defaultInstanceReconcileEvery = 2 * time.Minute

// maxInstanceRestarts bounds the workflows one reconcile starts per
// environment; the next one starts the rest.
const maxInstanceRestarts = 500

// reconcileInstances restarts, from PostgreSQL, the workflow of every live
// service instance that has none running, and has the running ones that
// are behind PostgreSQL sync (engine.LSM.RestartInstances), at most once
// per InstanceReconcileEvery; every replica does it.
func (s *Server) reconcileInstances(ctx context.Context, envs []store.Environment) {
	now := time.Now()
	last := s.lastInstances.Load()
	if now.Sub(time.Unix(0, last)) < s.cfg.InstanceReconcileEvery || !s.lastInstances.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	for _, e := range envs {
		n, err := s.lsm.RestartInstances(ctx, e, s.cfg.InstanceReconcileEvery, s.log)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("reconcile: service instance workflows", "environment", e.Name, "error", err)
		case n > 0:
			s.log.Warn("service instance workflows restarted from PostgreSQL", "environment", e.Name, "instances", n)
		}
	}
}

// lsmPreviewer serves the instances' dry-runs with the lifecycle engine's
// own validation and rendering (activities.LSM.PreviewInstance).
type lsmPreviewer struct{ l *activities.LSM }

func (p lsmPreviewer) PreviewInstance(ctx context.Context, envID, entity, instanceID string, attrs map[string]any) (api.LSMPreview, error) {
	// The proposal is of the version of the set an update edits.
	version := 0
	if inst, err := p.l.Store.GetInstance(ctx, envID, entity, instanceID); err == nil {
		version = lsm.EntityVersion(inst.ActiveVersion)
		if inst.Candidate != nil {
			version = lsm.EntityVersion(inst.CandidateVersion)
		}
	}
	pv, err := p.l.PreviewInstanceVersion(ctx, envID, entity, instanceID, version, attrs)
	if err != nil {
		return api.LSMPreview{}, err
	}
	return api.LSMPreview{OK: pv.Validation.OK, Errors: pv.Validation.Errors, ReadOnly: pv.Validation.ReadOnly,
		Resources: pv.Resources, RenderErrors: pv.RenderErrors}, nil
}

// PreviewModel serves the previews of a model change with the lifecycle
// engine's own rendering (activities.LSM.PreviewModel).
func (p lsmPreviewer) PreviewModel(ctx context.Context, envID string, archive []byte, after string, limit int) (api.ModelPreview, error) {
	mp, err := p.l.PreviewModel(ctx, envID, archive, after, limit)
	if me, ok := errors.AsType[*activities.ModelError](err); ok {
		return api.ModelPreview{}, &api.ModelFailure{Message: me.Errors.Error()}
	}
	if err != nil {
		return api.ModelPreview{}, err
	}
	out := api.ModelPreview{Hash: mp.Hash, BaseVersion: mp.BaseVersion, Skipped: mp.Skipped, Next: mp.Next,
		Instances: make([]api.PreviewedInstance, len(mp.Instances))}
	for i, fi := range mp.Instances {
		out.Instances[i] = api.PreviewedInstance{Instance: fi.Instance, Failed: fi.Failed, Errors: fi.Errors, Comparison: fi.Comparison}
	}
	return out, nil
}
