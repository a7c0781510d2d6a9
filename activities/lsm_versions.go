package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/project"
	"github.com/intendhq/intend/internal/store"
)

// Entity versions in the lifecycle engine's compiles (docs/lsm.md,
// "Entity versions"): every instance is evaluated with the version of
// its entity that the set it contributes is of.

// entityVersionKey names one version of an entity.
type entityVersionKey struct {
	entity  string
	version int
}

// versionSpecs returns the attributes of every version of entities the
// catalog keeps (the r attributes each leaves to the model differ).
func (l *LSM) versionSpecs(ctx context.Context, envID string, entities []store.ServiceEntity) (map[entityVersionKey][]lsm.AttributeSpec, error) {
	out := map[entityVersionKey][]lsm.AttributeSpec{}
	for _, e := range entities {
		out[entityVersionKey{e.Name, lsm.EntityVersion(e.Version)}] = e.Attributes
		if e.Version <= 1 {
			continue // one version: the entity's row has it
		}
		vs, err := l.Store.EntityVersions(ctx, envID, e.Name)
		if err != nil {
			return nil, classify(err)
		}
		for _, v := range vs {
			out[entityVersionKey{e.Name, lsm.EntityVersion(v.Version)}] = v.Attributes
		}
	}
	return out, nil
}

// instanceVersion is the InstanceVersions of one instance's compile (nil
// for version 0: the latest).
func instanceVersion(entity, id string, version int) map[string]map[string]int {
	if version == 0 {
		return nil
	}
	return map[string]map[string]int{entity: {id: version}}
}

// MigrateAttributes maps an instance's attributes of version from of its
// entity to version to with the CUE migrations of the environment's
// released model source (store.ReleasedModelSource), the one its
// instances compile with (compiler.Migrate). A mapping the model refuses
// is returned as compiler.Errors.
func (l *LSM) MigrateAttributes(ctx context.Context, envID, entity string, from, to int, attrs map[string]any) (map[string]any, error) {
	src, err := l.Store.ReleasedModelSource(ctx, envID)
	if err != nil {
		return nil, fmt.Errorf("model source: %w", err)
	}
	// The extracted source is the compiles' (extracted once per hash: a
	// bulk migration maps every instance with the same one).
	var bad compiler.Errors
	mt, release, err := l.models.acquire(ctx, l.TempDir, src.Hash, func(tree string) error {
		archive, err := l.Store.ModelArchive(ctx, envID, src.Hash)
		if err != nil {
			return fmt.Errorf("model source %s: %w", src.Hash, err)
		}
		if err := project.Extract(archive, tree); err != nil {
			bad = compiler.Errors{{Message: "model source " + src.Hash + ": " + err.Error()}}
			return err
		}
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	defer release()
	tree := mt.Tree()
	ctx, cancel := context.WithTimeout(ctx, orDefaultTimeout(l.CompileTimeout))
	defer cancel()
	return compiler.Migrate(ctx, compiler.MigrateOptions{Dir: tree, Entity: entity, From: from, To: to, Attributes: attrs})
}

// migrateRequest makes a migrate item's request from its instance as it
// is now: the current set (candidate, else active) mapped to version to
// (0: the latest) and the target version's definition. An instance on
// that version or a newer one, a version the catalog lacks and a mapping
// the model refuses are the item's failure (failure), not errors.
func (o *LSMOrders) migrateRequest(ctx context.Context, r itemRun, inst store.ServiceInstance, to int, req lsm.Request) (lsm.Request, string, error) {
	if o.Migrate == nil {
		return req, "this server cannot migrate instances", nil
	}
	target, err := o.Store.EntityAt(ctx, r.in.EnvironmentID, inst.Entity, to)
	if errors.Is(err, store.ErrNotFound) {
		return req, fmt.Sprintf("%s has no version %d", inst.Entity, to), nil
	}
	if err != nil {
		return req, "", classify(err)
	}
	cur, from := inst.Candidate, lsm.EntityVersion(inst.CandidateVersion)
	if cur == nil {
		cur, from = inst.Active, lsm.EntityVersion(inst.ActiveVersion)
	}
	if target.Version <= from {
		return req, fmt.Sprintf("service instance %s is of version %d, not older than %d", inst.ID, from, target.Version), nil
	}
	attrs, err := o.Migrate(ctx, r.in.EnvironmentID, inst.Entity, from, target.Version, cur)
	if errs, ok := errors.AsType[compiler.Errors](err); ok {
		return req, fmt.Sprintf("the model's migration from version %d to %d failed: %s", from, target.Version, errs.Error()), nil
	}
	if err != nil {
		return req, "", err
	}
	req.Op, req.Entity, req.Attributes = lsm.OpMigrate, target, attrs
	return req, "", nil
}
