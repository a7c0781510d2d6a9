package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// Entity versions (issue 14, B.5; docs/lsm.md, "Entity versions"): the
// catalog keeps every version of an entity the model keeps, one row each
// in service_entity_versions; service_entities is the newest's. Each
// attribute set of an instance is of one version (its *_version column).

// EntityVersionInfo is one version of a service entity in the catalog.
type EntityVersionInfo struct {
	lsm.Entity
	ModelHash    string    `json:"model_hash"`
	RegisteredAt time.Time `json:"registered_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Latest: this is the entity's newest version, which creates take
	// by default.
	Latest bool `json:"latest"`
	// Instances counts the live instances of this version by state.
	Instances map[string]int `json:"instances"`
}

// latestVersions is the newest version of each entity of entities, in
// the order the entities first appear.
func latestVersions(entities []lsm.Entity) []lsm.Entity {
	var out []lsm.Entity
	at := map[string]int{}
	for _, e := range entities {
		i, ok := at[e.Name]
		switch {
		case !ok:
			at[e.Name] = len(out)
			out = append(out, e)
		case lsm.EntityVersion(e.Version) > lsm.EntityVersion(out[i].Version):
			out[i] = e
		}
	}
	return out
}

// registerVersions writes every version of entities and removes the
// versions the model no longer keeps (live instances of them were
// refused before: breakingChanges).
func registerVersions(ctx context.Context, tx pgx.Tx, envID, modelHash string, entities []lsm.Entity) error {
	kept := map[string][]int32{}
	for _, e := range entities {
		v := lsm.EntityVersion(e.Version)
		attrs, lc, identity, err := entityColumns(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			insert into service_entity_versions (environment_id, entity, version, description, identity, attributes,
			  lifecycle, model_hash)
			values ($1::uuid, $2, $3, $4, $5, $6, $7, $8)
			on conflict (environment_id, entity, version) do update set description = excluded.description,
			  identity = excluded.identity, attributes = excluded.attributes, lifecycle = excluded.lifecycle,
			  model_hash = excluded.model_hash,
			  updated_at = case when (service_entity_versions.description, service_entity_versions.identity,
			                          service_entity_versions.attributes, service_entity_versions.lifecycle)
			                         is not distinct from (excluded.description, excluded.identity,
			                          excluded.attributes, excluded.lifecycle)
			                    then service_entity_versions.updated_at else now() end`,
			envID, e.Name, v, e.Description, identity, attrs, lc, modelHash); err != nil {
			return fmt.Errorf("register version %d of service entity %s: %w", v, e.Name, err)
		}
		kept[e.Name] = append(kept[e.Name], int32(v))
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range kept {
			if !yield(n) {
				return
			}
		}
	}) {
		if _, err := tx.Exec(ctx, `delete from service_entity_versions
			where environment_id = $1::uuid and entity = $2 and not (version = any($3))`,
			envID, name, kept[name]); err != nil {
			return err
		}
	}
	return nil
}

// EntityVersions returns the versions of an entity the catalog keeps,
// oldest first, with their live instances counted by state.
func (s *Store) EntityVersions(ctx context.Context, envID, entity string) ([]EntityVersionInfo, error) {
	return s.entityVersions(ctx, envID, entity, 0)
}

// GetEntityVersion returns one version of an entity (ErrNotFound when the
// catalog has no such version).
func (s *Store) GetEntityVersion(ctx context.Context, envID, entity string, version int) (EntityVersionInfo, error) {
	vs, err := s.entityVersions(ctx, envID, entity, version)
	if err != nil {
		return EntityVersionInfo{}, err
	}
	if len(vs) == 0 {
		return EntityVersionInfo{}, NotFound("version %d of service entity %s", version, entity)
	}
	return vs[0], nil
}

func (s *Store) entityVersions(ctx context.Context, envID, entity string, version int) ([]EntityVersionInfo, error) {
	rows, err := s.pool.Query(ctx, `
		select v.entity, v.version, v.description, coalesce(v.identity, ''), v.attributes, v.lifecycle, v.model_hash,
		       v.registered_at, v.updated_at, v.version = e.version,
		       coalesce((select jsonb_object_agg(state, n) from (
		           select state, count(*) as n from service_instances i
		           where i.environment_id = v.environment_id and i.entity = v.entity and not i.deleted
		             and coalesce(i.active_version, i.candidate_version, i.rollback_version, 1) = v.version
		           group by state) c), '{}')
		from service_entity_versions v
		join service_entities e on e.environment_id = v.environment_id and e.name = v.entity
		where v.environment_id = $1::uuid and v.entity = $2 and ($3 = 0 or v.version = $3)
		order by v.version`, envID, entity, version)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (EntityVersionInfo, error) {
		var v EntityVersionInfo
		err := row.Scan(&v.Name, &v.Version, &v.Description, &v.Identity, &v.Attributes, &v.Lifecycle, &v.ModelHash,
			&v.RegisteredAt, &v.UpdatedAt, &v.Latest, &v.Instances)
		return v, err
	})
}

// EntityAt returns the definition of version of entity (0: the newest),
// as the lifecycle engine takes it.
func (s *Store) EntityAt(ctx context.Context, envID, entity string, version int) (lsm.Entity, error) {
	if version == 0 {
		e, err := s.GetEntityDefinition(ctx, envID, entity)
		return e.Entity, err
	}
	v, err := s.GetEntityVersion(ctx, envID, entity, version)
	return v.Entity, err
}

// InstanceRef names a live instance: its id and identity ("" when its
// entity has none).
type InstanceRef struct {
	ID, Identity string
}

// InstancesOfVersion returns entity's live instances whose entity version
// (Sets.EntityVersion) is version, in id order.
func (s *Store) InstancesOfVersion(ctx context.Context, envID, entity string, version int) ([]InstanceRef, error) {
	rows, err := s.pool.Query(ctx, `select id::text, coalesce(identity, '') from service_instances
		where environment_id = $1::uuid and entity = $2 and not deleted
		  and coalesce(active_version, candidate_version, rollback_version, 1) = $3
		order by id`, envID, entity, version)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (InstanceRef, error) {
		var r InstanceRef
		err := row.Scan(&r.ID, &r.Identity)
		return r, err
	})
}

// EntitiesOfSets returns the definition of the version an instance with
// sets is of (Sets.EntityVersion), and of the other versions its sets are
// of, as the instance's workflow takes them.
func (s *Store) EntitiesOfSets(ctx context.Context, envID, entity string, sets lsm.Sets) (lsm.Entity, []lsm.Entity, error) {
	own := sets.EntityVersion()
	e, err := s.EntityAt(ctx, envID, entity, own)
	if err != nil {
		return e, nil, err
	}
	var others []lsm.Entity
	for _, set := range []struct {
		attrs   map[string]any
		version int
	}{{sets.Candidate, sets.CandidateVersion}, {sets.Active, sets.ActiveVersion}, {sets.Rollback, sets.RollbackVersion}} {
		v := lsm.EntityVersion(set.version)
		if set.attrs == nil || v == own || slices.ContainsFunc(others, func(x lsm.Entity) bool { return x.Version == v }) {
			continue
		}
		o, err := s.EntityAt(ctx, envID, entity, v)
		if err != nil {
			return e, nil, err
		}
		others = append(others, o)
	}
	return e, others, nil
}
