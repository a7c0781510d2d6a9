package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/publish"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/workflows"
)

// LSM holds the lifecycle engine's activities (task queue intend): write
// an instance's transfer, validate its attributes against the model, export
// its resource set, and look at that set's deploy. Every one is
// idempotent: ApplyTransfer by (instance, version), ExportInstance by
// content (it exports nothing when the set already holds what it would
// export), the others only read.
//
// The workflow runs them as local activities (workflows/lsm.go). Compiles
// read the environment's newest model source, extract it into a fresh
// directory under TempDir and remove it afterwards; Cache keeps the
// instances' outputs, so a validation with 1,000 live instances evaluates
// the one that changed. Exports that arrive together share one version
// (exportBatcher).
type LSM struct {
	Store *store.Store
	// TempDir holds the extracted model sources ("": os.TempDir()).
	TempDir string
	// Wake tells the environment's scheduler that a deploy was queued;
	// nil: the scheduler finds the request when it polls.
	Wake func(ctx context.Context, env store.Environment, reason string) error
	// Signal sends a signal to a workflow (NotifyModelChanged); a
	// workflow that does not run is no error.
	Signal func(ctx context.Context, workflowID, name string, arg any) error
	// CompileTimeout bounds one compile (0: DefaultCompileTimeout).
	CompileTimeout time.Duration
	// Cache keeps instances' compiled outputs between compiles of the
	// same model source (nil: every compile evaluates every instance). A
	// bounded Runner keeps its own in its workers; Cache asks for it.
	Cache *compiler.Cache
	// Runner runs the compiles (nil: compiler.InProcess); intend server's
	// bounds their time and memory in child processes.
	Runner compiler.Runner
	Log    *slog.Logger // nil: slog.Default()
	// Metrics counts and times the transfers ApplyTransfer writes (nil:
	// none are).
	Metrics *telemetry.Telemetry

	exports exportBatcher
	// envNames maps environment ids to their names (which never change),
	// for the metrics' labels.
	envNames sync.Map
	models   modelTrees
}

// Close removes the extracted model sources the activities kept.
func (l *LSM) Close() { l.models.close() }

// Register registers the activities under their explicit names.
func (l *LSM) Register(w workflows.ActivityRegistry) {
	workflows.ApplyTransferActivity.Register(w, l.ApplyTransfer)
	workflows.ValidateInstanceActivity.Register(w, l.ValidateInstance)
	workflows.ExportInstanceActivity.Register(w, l.ExportInstance)
	workflows.CheckInstanceDeployActivity.Register(w, l.CheckInstanceDeploy)
	workflows.LoadInstanceActivity.Register(w, l.LoadInstance)
	workflows.AllocateValuesActivity.Register(w, l.AllocateValues)
	workflows.NotifyModelChangedActivity.Register(w, l.NotifyModelChanged)
}

func (l *LSM) log() *slog.Logger { return orDefault(l.Log) }

// instanceSet is the resource set of an instance's resources.
func instanceSet(entity, id string) string { return entity + "/" + id }

// ApplyTransfer writes one version of an instance, its log row and the
// first response to its idempotent request in one transaction
// (store.ApplyInstanceChange). A retry finds the version written and
// returns the instance as that version left it. A write the store refuses (another live
// instance has the identity; the instance moved under another writer) is
// a non-retryable lsm.RejectConflict; a version another transfer wrote
// (the workflow is behind PostgreSQL) a non-retryable lsm.RejectStale
// with the instance's version as details.
func (l *LSM) ApplyTransfer(ctx context.Context, in workflows.ApplyTransferInput) (workflows.ServiceInstanceRecord, error) {
	event, err := json.Marshal(in.Event)
	if err != nil {
		return workflows.ServiceInstanceRecord{}, err
	}
	ch := store.InstanceChange{
		Entity: in.Entity, ID: in.InstanceID, Version: in.Version, Identity: in.Identity, State: in.State,
		Sets: in.Sets, Deleted: in.Deleted, Event: event, Errors: nullJSON(in.Errors),
		Delete: in.Event.Trigger == string(lsm.OnDelete),
	}
	if r := in.Request; r != nil && r.Key != "" {
		ch.Request = r
	}
	applied, err := l.Store.ApplyInstanceChange(ctx, in.EnvironmentID, ch)
	if rerr := referenceError(err); rerr != nil {
		return workflows.ServiceInstanceRecord{}, rerr
	}
	if vt := (*store.VersionTakenError)(nil); errors.As(err, &vt) {
		// The workflow is behind PostgreSQL: a stale rejection with the
		// instance's version, which the workflow takes as its cue to
		// sync (workflows.SyncSignal).
		return workflows.ServiceInstanceRecord{}, temporal.NewNonRetryableApplicationError(vt.Error(), lsm.RejectStale, err, vt.Current)
	}
	if ce := (*store.ConflictError)(nil); errors.As(err, &ce) {
		// The message is the store's own: the rejection shows it as is.
		return workflows.ServiceInstanceRecord{}, temporal.NewNonRetryableApplicationError(ce.What, lsm.RejectConflict, err)
	}
	if err != nil {
		return workflows.ServiceInstanceRecord{}, classify(err)
	}
	if applied.Written {
		l.observeTransfer(ctx, in, applied)
	}
	if err := l.notifyReferrers(ctx, in); err != nil {
		return workflows.ServiceInstanceRecord{}, err
	}
	return applied.Instance, nil
}

// AllocateValues gives a migration's candidate set the values of its
// version's allocated attributes (store.AllocateForVersion). A pool
// with no free value, or an attribute holding a value of another pool,
// is a non-retryable lsm.RejectConflict: the migration is refused and
// the instance stays as it is.
func (l *LSM) AllocateValues(ctx context.Context, in workflows.AllocateValuesInput) (map[string]any, error) {
	attrs, err := l.Store.AllocateForVersion(ctx, in.EnvironmentID, in.Entity, in.InstanceID, in.EntityVersion, in.Attributes)
	if ce := (*store.ConflictError)(nil); errors.As(err, &ce) {
		return nil, temporal.NewNonRetryableApplicationError(ce.What, lsm.RejectConflict, err)
	}
	if err != nil {
		return nil, classify(err)
	}
	return attrs, nil
}

// observeTransfer counts a transfer that was written and committed (a
// retry that finds it written counts nothing), and times the state it
// left, on the store's clock. Metrics are best effort: a failed read of
// the environment's name is logged and the transfer is not counted.
func (l *LSM) observeTransfer(ctx context.Context, in workflows.ApplyTransferInput, applied store.AppliedChange) {
	if l.Metrics == nil {
		return
	}
	env, err := l.environmentName(ctx, in.EnvironmentID)
	if err != nil {
		l.log().Warn("metrics: the environment of a transfer", "environment", in.EnvironmentID, "error", err)
		return
	}
	tr := telemetry.LSMTransfer{Environment: env, Entity: in.Entity, Source: applied.Source, Target: in.State,
		Trigger: in.Event.Trigger, Error: in.Event.Error}
	if !applied.SourceSince.IsZero() {
		tr.InSource = applied.Instance.UpdatedAt.Sub(applied.SourceSince)
	}
	l.Metrics.ObserveLSMTransfer(tr)
}

// environmentName is the name of the environment of id, read once.
func (l *LSM) environmentName(ctx context.Context, id string) (string, error) {
	if name, ok := l.envNames.Load(id); ok {
		return name.(string), nil
	}
	env, err := l.Store.GetEnvironment(ctx, id)
	if err != nil {
		return "", err
	}
	l.envNames.Store(id, env.Name)
	return env.Name, nil
}

// nullJSON drops an absent or null document.
func nullJSON(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	return b
}

// ValidateInstance compiles the environment's newest model source with
// the instance's candidate attributes and every other live instance's
// (the active set in active model states, the candidate set in candidate
// and designed ones; inactive instances and empty sets are left out). It
// succeeds when no error of the compile is the instance's: raised while
// evaluating it, or a duplicate id or dangling requires one of its
// resources is part of. Other instances' errors do not fail it. A model
// source that is missing or does not load fails it (nothing can be
// validated). The errors, all of them, are returned for the log. Every
// instance's r attributes are left out of the compile (the model computes
// them); a successful validation returns the values the model computed
// for this instance's (ReadOnly).
func (l *LSM) ValidateInstance(ctx context.Context, in workflows.ValidateInstanceInput) (workflows.ValidateInstanceResult, error) {
	out, _, err := l.validate(ctx, in)
	return out, err
}

// validate is ValidateInstance, which also returns the compile's result
// when the validation succeeded.
func (l *LSM) validate(ctx context.Context, in workflows.ValidateInstanceInput) (workflows.ValidateInstanceResult, *compiler.Result, error) {
	entities, err := l.Store.ListEntityDefinitions(ctx, in.EnvironmentID)
	if err != nil {
		return workflows.ValidateInstanceResult{}, nil, classify(err)
	}
	lifecycles := map[string]lsm.Lifecycle{}
	latest := map[string]int{}
	for _, e := range entities {
		lifecycles[e.Name] = e.Lifecycle
		latest[e.Name] = e.Version
	}
	specs, err := l.versionSpecs(ctx, in.EnvironmentID, entities)
	if err != nil {
		return workflows.ValidateInstanceResult{}, nil, err
	}
	live, err := l.Store.LiveServiceInstances(ctx, in.EnvironmentID)
	if err != nil {
		return workflows.ValidateInstanceResult{}, nil, classify(err)
	}
	instances := map[string]map[string]json.RawMessage{}
	versions := map[string]map[string]int{}
	rels := map[string]map[string]json.RawMessage{}
	resolve := liveResolver(live, lifecycles)
	add := func(entity, id string, version int, attrs map[string]any) error {
		// What its references name (lsm_relations.go): another
		// instance's problems are its own, left to its evaluation.
		rel, _, err := related(ctx, resolve, specs[entityVersionKey{entity, version}], attrs)
		if err != nil {
			return err
		}
		addRelated(rels, entity, id, rel)
		// The model computes the r attributes again.
		b, err := json.Marshal(lsm.WithoutReadOnly(specs[entityVersionKey{entity, version}], attrs))
		if err != nil {
			return fmt.Errorf("attributes of %s %s: %w", entity, id, err)
		}
		if instances[entity] == nil {
			instances[entity] = map[string]json.RawMessage{}
			versions[entity] = map[string]int{}
		}
		instances[entity][id] = b
		versions[entity][id] = lsm.EntityVersion(version)
		return nil
	}
	for _, inst := range live {
		if inst.ID == in.InstanceID {
			continue
		}
		lc, ok := lifecycles[inst.Entity]
		if !ok {
			continue
		}
		var attrs map[string]any
		var version int
		switch lc.States[inst.State].ModelState {
		case lsm.Active:
			attrs, version = inst.Active, inst.ActiveVersion
		case lsm.Designed:
			// Validated, queued to become active: its candidate set
			// (seed 003).
			attrs, version = inst.Candidate, inst.CandidateVersion
		case lsm.Candidate:
			// Not validated: only the instance being validated is in the
			// model with its candidate set. Another one contributes the
			// attributes it was last validated with, if any (an update
			// waiting for validation keeps its active set exported).
			attrs, version = inst.Active, inst.ActiveVersion
			if len(attrs) == 0 {
				attrs, version = inst.Rollback, inst.RollbackVersion
			}
		}
		if attrs == nil {
			continue
		}
		if err := add(inst.Entity, inst.ID, version, attrs); err != nil {
			return workflows.ValidateInstanceResult{}, nil, err
		}
	}
	attrs := in.Attributes
	if attrs == nil {
		attrs = map[string]any{}
	}
	own := in.EntityVersion
	if own == 0 {
		own = latest[in.Entity] // a workflow of before versions: the entity as the catalog has it
	}
	if err := add(in.Entity, in.InstanceID, own, attrs); err != nil {
		return workflows.ValidateInstanceResult{}, nil, err
	}
	if _, problems, _ := related(ctx, resolve, specs[entityVersionKey{in.Entity, own}], attrs); len(problems) > 0 {
		out, err := json.Marshal(relatedErrors(in.Entity, in.InstanceID, problems))
		return workflows.ValidateInstanceResult{Errors: out}, nil, err
	}
	res, errs, err := l.compileModelVersions(ctx, in.EnvironmentID, instances, versions, rels, &compiler.Focus{Entity: in.Entity, Instance: in.InstanceID})
	if err != nil {
		return workflows.ValidateInstanceResult{}, nil, err
	}
	if len(errs) == 0 {
		out := workflows.ValidateInstanceResult{OK: true}
		if raw := res.Parameters[in.Entity][in.InstanceID]; raw != nil {
			var param map[string]any
			if err := json.Unmarshal(raw, &param); err == nil {
				out.ReadOnly = lsm.ReadOnlyValues(specs[entityVersionKey{in.Entity, lsm.EntityVersion(own)}], param)
			}
		}
		return out, res, nil
	}
	out, err := json.Marshal(errs)
	if err != nil {
		return workflows.ValidateInstanceResult{}, nil, err
	}
	return workflows.ValidateInstanceResult{OK: !ownsAny(errs, in.Entity, in.InstanceID), Errors: out}, nil, nil
}

// instanceLabel is how the compiler names a service instance in its errors.
func instanceLabel(entity, id string) string { return "services." + entity + ".instances." + id }

// ownsAny reports whether one of errs is the instance's: raised while
// evaluating it (Instance), or about one of its resources (the Path of a
// duplicate id or a dangling requires is the resource's origin, prefixed
// by its instance; a duplicate's message names the first producer's).
// An error of no instance at all (the model does not load) counts too.
func ownsAny(errs compiler.Errors, entity, id string) bool {
	label := instanceLabel(entity, id)
	for _, e := range errs {
		if e.Instance == label || strings.HasPrefix(e.Path, label+": ") || strings.Contains(e.Message, label+": ") {
			return true
		}
		if e.Instance == "" && e.Path == "" && len(e.Positions) == 0 {
			return true // the model itself failed
		}
	}
	return false
}

// compileModelVersions compiles the environment's released model source
// (store.ReleasedModelSource: the newest a released version was built
// from, never a newer upload nobody released) with the given service
// instances. A model that does not compile is no activity
// error: its errors are returned (one without position when the source is
// missing or does not load). It takes the instances' entity
// versions (compiler.Options.InstanceVersions; nil: every instance of its
// entity's latest version) and, for a validation, the instance the
// compile is focused on (compiler.Options.Focus; nil: none).
func (l *LSM) compileModelVersions(ctx context.Context, envID string, instances map[string]map[string]json.RawMessage, versions map[string]map[string]int,
	related map[string]map[string]json.RawMessage, focus *compiler.Focus) (*compiler.Result, compiler.Errors, error) {
	src, err := l.Store.ReleasedModelSource(ctx, envID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, compiler.Errors{{Message: "the environment has no model source to compile the instance with (intend export uploads one)"}}, nil
	}
	if err != nil {
		return nil, nil, classify(err)
	}
	// Its settings now: a global admin's change of compile_cpu_limit
	// holds from the next compile on.
	env, err := l.Store.GetEnvironment(ctx, envID)
	if err != nil {
		return nil, nil, classify(err)
	}
	var bad compiler.Errors
	mt, release, err := l.models.acquire(ctx, l.TempDir, src.Hash, func(tree string) error {
		archive, err := l.Store.ModelArchive(ctx, envID, src.Hash)
		if err != nil {
			return classify(err) // pruned meanwhile: the retry reads the newer one
		}
		if err := project.Extract(archive, tree); err != nil {
			bad = compiler.Errors{{Message: "model source " + src.Hash + ": " + err.Error()}}
			return err
		}
		return nil
	})
	if bad != nil {
		return nil, bad, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer release()
	tree := mt.Tree()
	var facts map[string]map[string]json.RawMessage
	if mt.needsFacts() {
		if facts, err = envFacts(ctx, l.Store, envID); err != nil {
			return nil, nil, classify(err)
		}
	}
	opts := compiler.Options{Dir: tree, Instances: instances, InstanceVersions: versions, Related: related, Facts: facts, Cache: l.Cache,
		SourceKey: src.Hash, Focus: focus}
	defer heartbeat(ctx)()
	res, err := l.compile(ctx, env, opts)
	if err == nil {
		mt.learned(res.DeclaresFacts)
		return res, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	var errs compiler.Errors
	if !errors.As(err, &errs) {
		errs = compiler.Errors{{Message: relative(err.Error(), tree)}}
	}
	return nil, errs, nil
}

// compile runs the compiler through the Runner within the time limit and
// env's CPU time limit; a compile stopped at a limit is an error of the
// compile, like the model's own.
func (l *LSM) compile(ctx context.Context, env store.Environment, opts compiler.Options) (*compiler.Result, error) {
	res, err := publish.Compile(ctx, l.Runner, env, opts, l.CompileTimeout)
	if le, ok := errors.AsType[*compiler.LimitError](err); ok && ctx.Err() == nil {
		return nil, compiler.Errors{{Message: le.Error()}}
	}
	return res, err
}

// LoadInstance returns the instance as PostgreSQL holds it, as the
// workflow's snapshot, or nil when there is none (or it is deleted).
func (l *LSM) LoadInstance(ctx context.Context, in workflows.LoadInstanceInput) (*workflows.InstanceSnapshot, error) {
	inst, err := l.Store.GetInstance(ctx, in.EnvironmentID, in.Entity, in.InstanceID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if inst.Deleted || inst.Version == 0 {
		return nil, nil
	}
	// The versions of the entity its sets are of (the workflow's own
	// may be another).
	own, others, err := l.Store.EntitiesOfSets(ctx, in.EnvironmentID, in.Entity, inst.Sets)
	if err != nil {
		return nil, classify(err)
	}
	return &workflows.InstanceSnapshot{State: inst.State, Version: inst.Version, Identity: inst.Identity, Sets: inst.Sets,
		Entities: append([]lsm.Entity{own}, others...)}, nil
}

// ExportInstance makes a partial export of the instance's set
// ("<entity>/<id>"): its resources compiled from the active set
// (ExportResources), the same purged (ExportPurged), or none, the set
// removed (ExportRemove), and releases the newest version (with
// auto_deploy, the release queues a deploy). It is idempotent by content:
// when the set already holds exactly what it would export, it exports
// nothing; then, if some of the set's resources are not deployed as
// intended, it queues a deploy of them (auto_deploy only), so that a
// state that waits for a deploy (a retry after a failure) gets one.
// Compile errors and exports the merge refuses are outcomes (Failed,
// Errors), not activity errors.
func (l *LSM) ExportInstance(ctx context.Context, in workflows.ExportInstanceInput) (workflows.ExportInstanceResult, error) {
	set := instanceSet(in.Entity, in.InstanceID)
	env, err := l.Store.GetEnvironment(ctx, in.EnvironmentID)
	if err != nil {
		return workflows.ExportInstanceResult{}, classify(err)
	}
	failed := func(errs compiler.Errors) (workflows.ExportInstanceResult, error) {
		b, err := json.Marshal(errs)
		if err != nil {
			return workflows.ExportInstanceResult{}, err
		}
		l.log().Warn("service instance export failed", "environment", env.Name, "entity", in.Entity,
			"instance", in.InstanceID, "version", in.InstanceVersion, "error", errs.Error())
		return workflows.ExportInstanceResult{Failed: true, Errors: b}, nil
	}

	var resources []compiler.Resource
	if in.Mode != workflows.ExportRemove && in.Attributes != nil {
		attrs, err := json.Marshal(in.Attributes)
		if err != nil {
			return workflows.ExportInstanceResult{}, err
		}
		rels, errs, err := l.instanceRelated(ctx, in.EnvironmentID, in.Entity, in.InstanceID, in.Attributes)
		if err != nil {
			return workflows.ExportInstanceResult{}, err
		}
		if len(errs) > 0 {
			return failed(errs)
		}
		res, errs, err := l.compileModelVersions(ctx, in.EnvironmentID, map[string]map[string]json.RawMessage{in.Entity: {in.InstanceID: attrs}},
			instanceVersion(in.Entity, in.InstanceID, in.EntityVersion), rels, nil)
		if err != nil {
			return workflows.ExportInstanceResult{}, err
		}
		if len(errs) > 0 {
			return failed(errs)
		}
		for _, r := range res.Resources {
			if r.ResourceSet != set {
				continue // the model's own resources are a full export's business
			}
			if in.Mode == workflows.ExportPurged {
				r.Purged = true
			}
			resources = append(resources, r)
		}
		// Removed in the reverse order of their creation.
		compiler.OrderRemovals(resources)
	}
	doc := struct {
		Resources []compiler.Resource `json:"resources"`
		Removed   []string            `json:"removed_resource_sets,omitempty"`
	}{Resources: resources}
	if len(resources) == 0 {
		doc.Resources = []compiler.Resource{}
		doc.Removed = []string{set}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return workflows.ExportInstanceResult{}, err
	}
	partial, removed, err := intent.DecodePartial(body)
	if err != nil {
		return failed(compiler.Errors{{Message: "the instance's resources are invalid: " + err.Error()}})
	}

	before, err := l.Store.ResourceSetContent(ctx, in.EnvironmentID, set)
	if err != nil {
		return workflows.ExportInstanceResult{}, classify(err)
	}
	out := workflows.ExportInstanceResult{Since: before.Now, Version: before.BaseVersion, Resources: len(partial.Resources)}
	var request *store.Request
	woken := false
	if !sameContent(before.Hashes, partial.Resources) {
		version, req, err := l.exports.export(ctx, in.EnvironmentID, partial.Resources, removed,
			func(ctx context.Context, rs []intent.Resource, removed []string) (int64, *store.Request, error) {
				return l.exportAndRelease(ctx, env, rs, removed)
			})
		var ve *intent.ValidationError
		if errors.As(err, &ve) {
			return failed(compiler.Errors{{Message: "the partial export of " + set + " was refused: " + ve.Error()}})
		}
		if err != nil {
			return workflows.ExportInstanceResult{}, classify(err)
		}
		out.Version, out.Changed, request, woken = version, true, req, true
	}
	if out.Version == 0 {
		return out, nil // nothing was ever exported: nothing to release
	}
	if !out.Changed && out.Version > before.ReleasedVersion {
		rel, err := l.Store.ReleaseVersion(ctx, in.EnvironmentID, out.Version)
		switch {
		case errors.Is(err, store.ErrConflict):
			// A newer version was released meanwhile; it holds the set
			// as well (only this workflow changes it).
		case err != nil:
			return workflows.ExportInstanceResult{}, classify(err)
		default:
			request = rel.Request
		}
	}
	if !out.Changed && request == nil && env.Settings.AutoDeploy && len(partial.Resources) > 0 {
		st, err := l.Store.ResourceSetDeploy(ctx, in.EnvironmentID, set, time.Time{})
		if err != nil {
			return workflows.ExportInstanceResult{}, classify(err)
		}
		if len(st.IDs) > 0 {
			r, err := l.Store.RequestDeploy(ctx, in.EnvironmentID, store.Request{Kind: "deploy",
				Reason: "service instance " + set + " version " + fmt.Sprint(in.InstanceVersion), ResourceIDs: st.IDs})
			if err != nil {
				return workflows.ExportInstanceResult{}, classify(err)
			}
			request = &r
		}
	}
	if request != nil && !woken {
		l.wake(ctx, env, request.Reason)
	}
	l.log().Info("service instance exported", "environment", env.Name, "entity", in.Entity, "instance", in.InstanceID,
		"mode", in.Mode, "version", out.Version, "exported", out.Changed, "resources", out.Resources)
	return out, nil
}

// exportAndRelease exports the sets of a batch of instances as one
// version (exportBatcher) and releases it, in one transaction
// (store.ExportInstanceSets), and wakes the scheduler for the deploy the
// release queued.
func (l *LSM) exportAndRelease(ctx context.Context, env store.Environment, rs []intent.Resource, removed []string) (int64, *store.Request, error) {
	rel, err := l.Store.ExportInstanceSets(ctx, env.ID, intent.Version{Resources: rs}, removed)
	if err != nil {
		return 0, nil, err
	}
	if rel.Request != nil {
		l.wake(ctx, env, rel.Request.Reason)
	}
	return rel.Version.Version, rel.Request, nil
}

// wake tells the scheduler about a queued deploy request; when it cannot,
// the scheduler's poll finds the request.
func (l *LSM) wake(ctx context.Context, env store.Environment, reason string) {
	if l.Wake == nil {
		return
	}
	if err := l.Wake(ctx, env, reason); err != nil {
		l.log().Warn("scheduler not woken after an instance's export", "environment", env.Name, "error", err)
	}
}

// sameContent reports whether the set's stored resources (intent hashes by
// id) are exactly rs.
func sameContent(stored map[string][]byte, rs []intent.Resource) bool {
	if len(stored) != len(rs) {
		return false
	}
	for _, r := range rs {
		h := r.Hash()
		if old, ok := stored[r.ID.String()]; !ok || !bytes.Equal(old, h[:]) {
			return false
		}
	}
	return true
}

// CheckInstanceDeploy says how the deploy of the instance's set goes:
// done when every resource is deployed with the set's newest intent (an
// empty set is done), failed when one of them failed at or after Since,
// pending otherwise.
func (l *LSM) CheckInstanceDeploy(ctx context.Context, in workflows.CheckInstanceDeployInput) (workflows.CheckInstanceDeployResult, error) {
	st, err := l.Store.ResourceSetDeploy(ctx, in.EnvironmentID, instanceSet(in.Entity, in.InstanceID), in.Since)
	if err != nil {
		return workflows.CheckInstanceDeployResult{}, classify(err)
	}
	out := workflows.CheckInstanceDeployResult{Status: workflows.DeployPending, Total: st.Total, Deployed: st.Deployed, Failed: st.Failed}
	switch {
	case st.Failed > 0:
		out.Status = workflows.DeployFailed
	case st.Deployed == st.Total:
		out.Status = workflows.DeployDone
	}
	return out, nil
}

// NotifyModelChanged signals every live instance of the environment that
// its model source changed (workflows.ModelChangedSignal): each exports its
// resources again, built by the new model. Signalling twice is harmless
// (an export that changes nothing exports nothing), so a retry starts
// over.
func (l *LSM) NotifyModelChanged(ctx context.Context, in workflows.ModelChangedInput) (workflows.ModelChangedResult, error) {
	var out workflows.ModelChangedResult
	if l.Signal == nil {
		return out, temporal.NewNonRetryableApplicationError("no signal function configured", "config", nil)
	}
	live, err := l.Store.LiveServiceInstances(ctx, in.EnvironmentID)
	if err != nil {
		return out, classify(err)
	}
	for _, inst := range live {
		id := workflows.ServiceInstanceWorkflowID(in.EnvironmentName, inst.Entity, inst.ID)
		if err := l.Signal(ctx, id, workflows.ModelChangedSignal, in.Hash); err != nil {
			return out, fmt.Errorf("signal %s: %w", id, err)
		}
		out.Signalled++
	}
	l.log().Info("service instances told of a new model source", "environment", in.EnvironmentName,
		"model", in.Hash, "instances", out.Signalled)
	return out, nil
}

// PreviewInstance validates attrs, an instance's proposed attribute set
// of version of the entity (0: the latest; its r attributes left out:
// the model computes them), exactly as the validation of an update would
// (ValidateInstance), and renders the instance's resources from them as
// its export would (ExportInstance's compile: the instance alone),
// changing nothing. It serves the instances' dry-runs (api.LSMPreviewer);
// it runs in the API request, its compiles bounded by the Runner like
// every other.
func (l *LSM) PreviewInstance(ctx context.Context, envID, entity, instanceID string, version int, attrs map[string]any) (lsm.InstancePreview, error) {
	var out lsm.InstancePreview
	v, _, err := l.validate(ctx, workflows.ValidateInstanceInput{
		EnvironmentID: envID, Entity: entity, InstanceID: instanceID, Attributes: attrs, EntityVersion: version,
	})
	if err != nil {
		return out, err
	}
	out.OK, out.Errors, out.ReadOnly = v.OK, v.Errors, v.ReadOnly
	if !v.OK {
		return out, nil
	}
	raw, err := json.Marshal(attrs)
	if err != nil {
		return out, err
	}
	rels, errs, err := l.instanceRelated(ctx, envID, entity, instanceID, attrs)
	if err != nil {
		return out, err
	}
	if len(errs) > 0 {
		b, err := json.Marshal(errs)
		out.RenderErrors = b
		return out, err
	}
	res, errs, err := l.compileModelVersions(ctx, envID, map[string]map[string]json.RawMessage{entity: {instanceID: raw}},
		instanceVersion(entity, instanceID, version), rels, nil)
	if err != nil {
		return out, err
	}
	render := func(errs compiler.Errors) (lsm.InstancePreview, error) {
		b, err := json.Marshal(errs)
		out.RenderErrors = b
		return out, err
	}
	if len(errs) > 0 {
		return render(errs)
	}
	set := instanceSet(entity, instanceID)
	doc := struct {
		Resources []compiler.Resource `json:"resources"`
	}{Resources: []compiler.Resource{}}
	for _, r := range res.Resources {
		if r.ResourceSet == set {
			doc.Resources = append(doc.Resources, r)
		}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return out, err
	}
	partial, _, err := intent.DecodePartial(body)
	if err != nil {
		return render(compiler.Errors{{Message: "the instance's resources are invalid: " + err.Error()}})
	}
	out.Resources = partial.Resources
	return out, nil
}
