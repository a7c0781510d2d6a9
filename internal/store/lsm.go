package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// The lifecycle service manager's state: the catalog (service entities),
// the inventory (service instances with their three attribute sets) and
// each instance's log, one row per version. The lifecycle engine writes an
// instance, its log row and the first response to an idempotent request in
// one transaction per transfer (ApplyInstanceChange).

// ServiceEntity is a service entity of the catalog.
type ServiceEntity struct {
	lsm.Entity
	ModelHash string `json:"model_hash"`
	// Instances counts the live instances by state (ListEntities and
	// GetEntity fill it in).
	Instances    map[string]int `json:"instances"`
	RegisteredAt time.Time      `json:"registered_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
	// Config is what operators set for the entity (lsm_config.go).
	Config EntityConfig `json:"config"`
}

// BreakingChange is one way a new catalog would break live instances.
type BreakingChange struct {
	Entity    string `json:"entity"`
	Attribute string `json:"attribute,omitempty"`
	// Pool is the pool of a removed_pool or shrunk_pool change
	// (lsm_alloc.go).
	Pool string `json:"pool,omitempty"`
	// Version is the entity version whose instances it breaks (0 for a
	// removed entity).
	Version int `json:"version,omitempty"`
	// Change is removed_entity, removed_version, removed_attribute,
	// retyped_attribute, unallocated_attribute, removed_pool or
	// shrunk_pool.
	Change string `json:"change"`
	Detail string `json:"detail"`
	// Instances are the ids of the live instances it would break.
	Instances []string `json:"instances"`
}

// BreakingChangesError refuses a catalog update that would break live
// instances.
type BreakingChangesError struct{ Changes []BreakingChange }

func (e *BreakingChangesError) Error() string {
	var parts []string
	for _, c := range e.Changes {
		parts = append(parts, fmt.Sprintf("%s: %s (%d live instances)", c.Entity, c.Detail, len(c.Instances)))
	}
	return "the service catalog update would break live instances: " + strings.Join(parts, "; ") +
		" (a breaking change is a new version of the entity, the versions live instances use kept: docs/lsm.md, \"Entity versions\")"
}

// RegisterEntities makes entities the environment's catalog, as compiled
// from the model source modelHash: new entities are added, existing ones
// updated, and ones the model no longer has removed. An update that would
// break a live instance (its entity removed, an attribute it has a value
// for removed, or retyped so that its value no longer fits) is refused
// with a *BreakingChangesError naming every such instance, and changes
// nothing. An upload or a compile registers the catalog with its model
// source in one transaction (PutModel); this is the catalog alone.
func (s *Store) RegisterEntities(ctx context.Context, envID, modelHash string, entities []lsm.Entity) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		return registerEntities(ctx, tx, envID, modelHash, entities)
	})
}

// entityColumns are what a catalog row keeps of e as JSON, and its
// identity attribute (NULL when it has none).
func entityColumns(e lsm.Entity) (attrs, lifecycle []byte, identity *string, err error) {
	if attrs, err = json.Marshal(e.Attributes); err != nil {
		return nil, nil, nil, err
	}
	if lifecycle, err = json.Marshal(e.Lifecycle); err != nil {
		return nil, nil, nil, err
	}
	if e.Identity != "" {
		identity = &e.Identity
	}
	return attrs, lifecycle, identity, nil
}

// registerEntities is RegisterEntities in tx, which holds the
// environment's lock. entities may hold several versions of an entity
// (compiler.Result's Services and PreviousServices): the newest is the
// entity's row, and every one a row of service_entity_versions.
func registerEntities(ctx context.Context, tx pgx.Tx, envID, modelHash string, entities []lsm.Entity) error {
	live, err := liveInstances(ctx, tx, envID)
	if err != nil {
		return err
	}
	latest := latestVersions(entities)
	if changes := breakingChanges(entities, live); len(changes) > 0 {
		return &BreakingChangesError{Changes: changes}
	}
	names := make([]string, 0, len(latest))
	for _, e := range latest {
		attrs, lc, identity, err := entityColumns(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			insert into service_entities (environment_id, name, description, identity, attributes, lifecycle, model_hash, version)
			values ($1::uuid, $2, $3, $4, $5, $6, $7, $8)
			on conflict (environment_id, name) do update set description = excluded.description,
			  identity = excluded.identity, attributes = excluded.attributes, lifecycle = excluded.lifecycle,
			  model_hash = excluded.model_hash, version = excluded.version,
			  updated_at = case when (service_entities.description, service_entities.identity,
			                          service_entities.attributes, service_entities.lifecycle, service_entities.version)
			                         is not distinct from (excluded.description, excluded.identity,
			                          excluded.attributes, excluded.lifecycle, excluded.version)
			                    then service_entities.updated_at else now() end`,
			envID, e.Name, e.Description, identity, attrs, lc, modelHash, lsm.EntityVersion(e.Version)); err != nil {
			return fmt.Errorf("register service entity %s: %w", e.Name, err)
		}
		names = append(names, e.Name)
	}
	if err := registerVersions(ctx, tx, envID, modelHash, entities); err != nil {
		return err
	}
	// Entities the model dropped go, with their deleted instances'
	// rows and logs (live ones were refused above).
	if _, err := tx.Exec(ctx, `delete from service_instances
		where environment_id = $1::uuid and deleted and not (entity = any($2))`, envID, names); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `delete from service_entities where environment_id = $1::uuid and not (name = any($2))`,
		envID, names)
	return err
}

// liveInstance is what the breaking-change check needs of an instance.
type liveInstance struct {
	entity, id string
	sets       lsm.Sets
}

func liveInstances(ctx context.Context, tx pgx.Tx, envID string) ([]liveInstance, error) {
	rows, err := tx.Query(ctx, `select entity, id::text, candidate_attributes, active_attributes, rollback_attributes,
		coalesce(candidate_version, 0), coalesce(active_version, 0), coalesce(rollback_version, 0)
		from service_instances where environment_id = $1::uuid and not deleted order by entity, id`, envID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (liveInstance, error) {
		var li liveInstance
		err := row.Scan(&li.entity, &li.id, &li.sets.Candidate, &li.sets.Active, &li.sets.Rollback,
			&li.sets.CandidateVersion, &li.sets.ActiveVersion, &li.sets.RollbackVersion)
		return li, err
	})
}

// breakingChanges lists what a new catalog breaks among the live
// instances: each set of an instance is checked against the version of
// its entity it is of, which the catalog must still have.
func breakingChanges(entities []lsm.Entity, live []liveInstance) []BreakingChange {
	type key struct {
		name    string
		version int
	}
	byVersion := map[key]lsm.Entity{}
	for _, e := range entities {
		byVersion[key{e.Name, lsm.EntityVersion(e.Version)}] = e
	}
	latest := map[string]int{}
	for _, e := range latestVersions(entities) {
		latest[e.Name] = lsm.EntityVersion(e.Version)
	}
	var out []BreakingChange
	add := func(c BreakingChange, id string) {
		for i := range out {
			if out[i].Entity == c.Entity && out[i].Version == c.Version && out[i].Attribute == c.Attribute && out[i].Change == c.Change {
				if !slices.Contains(out[i].Instances, id) {
					out[i].Instances = append(out[i].Instances, id)
				}
				return
			}
		}
		c.Instances = []string{id}
		out = append(out, c)
	}
	for _, li := range live {
		if _, ok := latest[li.entity]; !ok {
			add(BreakingChange{Entity: li.entity, Change: "removed_entity",
				Detail: "the model no longer defines the entity"}, li.id)
			continue
		}
		for _, set := range []struct {
			attrs   map[string]any
			version int
		}{{li.sets.Candidate, li.sets.CandidateVersion}, {li.sets.Active, li.sets.ActiveVersion},
			{li.sets.Rollback, li.sets.RollbackVersion}} {
			if set.attrs == nil {
				continue
			}
			v := lsm.EntityVersion(set.version)
			e, ok := byVersion[key{li.entity, v}]
			if !ok {
				add(BreakingChange{Entity: li.entity, Version: v, Change: "removed_version",
					Detail: fmt.Sprintf("version %d was removed, and live instances are of it: keep it in previous until they are migrated", v)}, li.id)
				continue
			}
			specs := map[string]lsm.AttributeSpec{}
			for _, a := range e.Attributes {
				specs[a.Name] = a
			}
			hint := ""
			if v == latest[li.entity] {
				hint = fmt.Sprintf(": make the change a new version (version: %d, with version %d in previous and a migrate)", v+1, v)
			}
			for _, a := range e.Attributes {
				if _, has := set.attrs[a.Name]; a.Allocated() && !has {
					add(BreakingChange{Entity: li.entity, Version: v, Attribute: a.Name, Pool: a.Allocate, Change: "unallocated_attribute",
						Detail: fmt.Sprintf("attribute %s of version %d is now allocated from pool %s, and live instances have no value: values are allocated when an instance is created", a.Name, v, a.Allocate)}, li.id)
				}
			}
			for name, val := range set.attrs {
				spec, ok := specs[name]
				if !ok {
					add(BreakingChange{Entity: li.entity, Version: v, Attribute: name, Change: "removed_attribute",
						Detail: fmt.Sprintf("attribute %s of version %d was removed%s", name, v, hint)}, li.id)
					continue
				}
				if want, ok := fits(spec.Schema, val); !ok {
					add(BreakingChange{Entity: li.entity, Version: v, Attribute: name, Change: "retyped_attribute",
						Detail: fmt.Sprintf("attribute %s of version %d is now %s%s", name, v, want, hint)}, li.id)
				}
			}
		}
	}
	return out
}

// fits reports whether v has a JSON type the schema's "type" allows (no
// "type": anything fits), and the allowed types.
func fits(schema json.RawMessage, v any) (string, bool) {
	types, anything := lsm.SchemaTypes(schema)
	if anything {
		return "", true
	}
	kind := jsonKind(v)
	for _, t := range types {
		if t == kind || (t == "number" && kind == "integer") {
			return "", true
		}
	}
	return strings.Join(types, " or "), false
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// ListEntities returns the catalog, by name, with live instance counts.
func (s *Store) ListEntities(ctx context.Context, envID string) ([]ServiceEntity, error) {
	return s.entities(ctx, envID, "", true)
}

// GetEntity returns one service entity with its live instance counts.
func (s *Store) GetEntity(ctx context.Context, envID, name string) (ServiceEntity, error) {
	return s.getEntity(ctx, envID, name, true)
}

// ListEntityDefinitions is ListEntities without the live instance counts
// (Instances nil), and GetEntityDefinition GetEntity: what the lifecycle
// engine's writes and validations read. The counts read every live
// instance of the entity, three times per instance create.
func (s *Store) ListEntityDefinitions(ctx context.Context, envID string) ([]ServiceEntity, error) {
	return s.entities(ctx, envID, "", false)
}

// GetEntityDefinition: see ListEntityDefinitions.
func (s *Store) GetEntityDefinition(ctx context.Context, envID, name string) (ServiceEntity, error) {
	return s.getEntity(ctx, envID, name, false)
}

func (s *Store) getEntity(ctx context.Context, envID, name string, counts bool) (ServiceEntity, error) {
	es, err := s.entities(ctx, envID, name, counts)
	if err != nil {
		return ServiceEntity{}, err
	}
	if len(es) == 0 {
		return ServiceEntity{}, NotFound("service entity %s", name)
	}
	return es[0], nil
}

// entitiesSQL reads the catalog ($1 environment, $2 one entity or "").
// The live instance counts, the last column, are left null, or filled
// in where the query has %s.
const entitiesSQL = `
		select e.name, e.description, coalesce(e.identity, ''), e.attributes, e.lifecycle, e.model_hash,
		       e.registered_at, e.updated_at, e.config, e.version, %s
		from service_entities e
		where e.environment_id = $1::uuid and ($2 = '' or e.name = $2)
		order by e.name`

var (
	entitiesCountedSQL = fmt.Sprintf(entitiesSQL, `coalesce((select jsonb_object_agg(state, n) from (
		           select state, count(*) as n from service_instances i
		           where i.environment_id = e.environment_id and i.entity = e.name and not i.deleted
		           group by state) c), '{}')`)
	entitiesUncountedSQL = fmt.Sprintf(entitiesSQL, `null::jsonb`)
)

func (s *Store) entities(ctx context.Context, envID, name string, counts bool) ([]ServiceEntity, error) {
	q := entitiesUncountedSQL
	if counts {
		q = entitiesCountedSQL
	}
	rows, err := s.pool.Query(ctx, q, envID, name)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ServiceEntity, error) {
		var e ServiceEntity
		var config []byte
		err := row.Scan(&e.Name, &e.Description, &e.Identity, &e.Attributes, &e.Lifecycle, &e.ModelHash,
			&e.RegisteredAt, &e.UpdatedAt, &config, &e.Version, &e.Instances)
		if err == nil {
			e.Config, err = decodeEntityConfig(config)
		}
		return e, err
	})
}

// ServiceInstance is a service instance of the inventory.
type ServiceInstance = lsm.Instance

// InstanceChange is one transfer of an instance, as ApplyInstanceChange
// writes it.
type InstanceChange struct {
	Entity string
	ID     string
	// Version is the version the change makes: 1 creates the instance,
	// any other must be the current version plus one.
	Version  int64
	Identity string
	State    string
	Sets     lsm.Sets
	// Deleted marks the instance gone (its terminal state).
	Deleted bool
	// Delete: the change is a delete request (an on_delete transfer),
	// refused while other instances reference the instance
	// (lsm_references.go), as is one to a state that deletes or purges.
	Delete bool
	// Event says what caused it, for the log.
	Event json.RawMessage
	// Errors are a failed validation's compile errors, for the log.
	Errors json.RawMessage
	// Request, when set, stores the instance as written as the first
	// response to an idempotent request.
	Request *lsm.IdempotentRequest
}

// AppliedChange is what ApplyInstanceChange did.
type AppliedChange struct {
	// Instance is the instance as it is after the change; its UpdatedAt
	// is the time of the change when Written.
	Instance ServiceInstance
	// Written says that this call wrote the version and its transaction
	// committed; false when the version was written before (a retried
	// activity whose first attempt committed), and nothing was written.
	// Whoever counts transfers counts the Written ones, so a retry
	// counts nothing twice.
	Written bool
	// Source is the state the instance was in before the change ("" when
	// the change created it), and SourceSince when it entered that state:
	// the time of the earliest transfer of its latest run of versions in
	// it, so that a transfer from a state to itself does not restart the
	// clock. Both are set only when Written.
	Source      string
	SourceSince time.Time
}

// ApplyInstanceChange writes a transfer in one transaction: the instance
// row, its log row, an outbox row per callback that hears of it and, for
// an idempotent request, its first response. It
// is idempotent: when the version was written before (a retried activity),
// it returns the instance as that version left it and writes nothing. A version that is
// neither next nor written before is ErrConflict (a stale writer).
func (s *Store) ApplyInstanceChange(ctx context.Context, envID string, ch InstanceChange) (AppliedChange, error) {
	var out AppliedChange
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = AppliedChange{}
		var current int64
		var source string
		var since time.Time
		// The source state and when the instance entered it come with
		// the lock, in the same round trip: the log's first version after
		// the last one in another state (two probes of its primary key).
		err := tx.QueryRow(ctx, `select i.version, i.state, coalesce((select l.created_at from service_instance_log l
				where l.environment_id = i.environment_id and l.instance_id = i.id
				  and l.version = 1 + coalesce((select max(m.version) from service_instance_log m
				      where m.environment_id = i.environment_id and m.instance_id = i.id and m.state <> i.state), 0)),
				i.updated_at)
			from service_instances i
			where i.environment_id = $1::uuid and i.id = $2::uuid for update of i`, envID, ch.ID).Scan(&current, &source, &since)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if ch.Version != 1 {
				return NotFound("service instance %s", ch.ID)
			}
		case err != nil:
			return err
		case current >= ch.Version:
			// A retry finds its version written with what it writes; a
			// writer behind PostgreSQL finds another transfer there. A
			// create's candidate set was written with the values the
			// server allocated, which the retry does not have: they are
			// left out of the comparison (lsm_alloc.go).
			cand, allocNames := ch.Sets.Candidate, []string{}
			if ch.Version == 1 {
				if cand, allocNames, err = withoutAllocated(ctx, tx, envID, ch); err != nil {
					return err
				}
			}
			var same bool
			err := tx.QueryRow(ctx, `select state = $4 and (candidate_attributes - $8::text[]) is not distinct from $5
					and active_attributes is not distinct from $6 and rollback_attributes is not distinct from $7
				from service_instance_log
				where environment_id = $1::uuid and instance_id = $2::uuid and version = $3`,
				envID, ch.ID, ch.Version, ch.State, cand, ch.Sets.Active, ch.Sets.Rollback, allocNames).Scan(&same)
			if errors.Is(err, pgx.ErrNoRows) {
				return Conflict("service instance %s is at version %d, not %d", ch.ID, current, ch.Version-1)
			}
			if err != nil {
				return err
			}
			if !same {
				return &VersionTakenError{ID: ch.ID, Version: ch.Version, Current: current}
			}
			out.Instance, err = instanceAt(ctx, tx, envID, ch, current)
			return err
		case current != ch.Version-1:
			return Conflict("service instance %s is at version %d, not %d", ch.ID, current, ch.Version-1)
		}
		refs, err := checkReferences(ctx, tx, envID, ch)
		if err != nil {
			return err
		}
		var identity *string
		if ch.Identity != "" {
			identity = &ch.Identity
		}
		// A create takes its allocated values (lsm_alloc.go); the
		// transfer that terminates an instance gives them back.
		var allocs []allocated
		if ch.Version == 1 && !ch.Deleted {
			if ch.Sets.Candidate, allocs, err = allocate(ctx, tx, envID, ch); err != nil {
				return err
			}
		}
		if ch.Deleted && ch.Version > 1 {
			// Before the row's write: a create locks its pools and then
			// the environment's live count (the insert's trigger), and so
			// does a termination, its pools here and the count with the
			// row (migrations 042, 043); the other order deadlocks them.
			if err := releaseAllocations(ctx, tx, envID, ch.ID); err != nil {
				return err
			}
		}
		cv, av, rv := setVersion(ch.Sets.Candidate, ch.Sets.CandidateVersion),
			setVersion(ch.Sets.Active, ch.Sets.ActiveVersion), setVersion(ch.Sets.Rollback, ch.Sets.RollbackVersion)
		if ch.Version == 1 {
			_, err = tx.Exec(ctx, `insert into service_instances (environment_id, entity, id, identity, state, version,
				candidate_attributes, active_attributes, rollback_attributes, deleted,
				candidate_version, active_version, rollback_version)
				values ($1::uuid, $2, $3::uuid, $4, $5, 1, $6, $7, $8, $9, $10, $11, $12)`,
				envID, ch.Entity, ch.ID, identity, ch.State, ch.Sets.Candidate, ch.Sets.Active, ch.Sets.Rollback, ch.Deleted,
				cv, av, rv)
		} else {
			_, err = tx.Exec(ctx, `update service_instances set state = $3, version = $4, identity = $5,
				candidate_attributes = $6, active_attributes = $7, rollback_attributes = $8, deleted = $9,
				candidate_version = $10, active_version = $11, rollback_version = $12,
				updated_at = now()
				where environment_id = $1::uuid and id = $2::uuid`,
				envID, ch.ID, ch.State, ch.Version, identity, ch.Sets.Candidate, ch.Sets.Active, ch.Sets.Rollback, ch.Deleted,
				cv, av, rv)
		}
		if err != nil {
			if isUniqueViolation(err, "service_instances_identity") {
				return Conflict("another live %s instance has identity %q", ch.Entity, ch.Identity)
			}
			return fmt.Errorf("write service instance %s: %w", ch.ID, err)
		}
		if ch.Version == 1 && !ch.Deleted {
			// Counted by the insert's trigger, which holds the count's
			// row until this transaction ends: a create beside it waits,
			// then counts this one.
			if err := checkInstanceQuota(ctx, tx, envID, 0); err != nil {
				return err
			}
		}
		if err := refs.write(ctx, tx, envID, ch.ID); err != nil {
			return err
		}
		if err := recordAllocations(ctx, tx, envID, ch.ID, allocs); err != nil {
			return err
		}
		event := ch.Event
		if len(event) == 0 {
			event = json.RawMessage(`{}`)
		}
		// The log row, and the callbacks' outbox rows (callbacks.go).
		if err := logTransfer(ctx, tx, envID, ch, event); err != nil {
			return err
		}
		if err := notifyTransfer(ctx, tx, envID, ch.ID, ch.Version); err != nil {
			return err
		}
		inst, err := getInstance(ctx, tx, envID, "", ch.ID)
		if err != nil {
			return err
		}
		out = AppliedChange{Instance: inst, Written: true}
		if ch.Version > 1 {
			out.Source, out.SourceSince = source, since
		}
		if r := ch.Request; r != nil {
			body, err := json.Marshal(inst)
			if err != nil {
				return err
			}
			// The first response stays; one that expired (not yet pruned)
			// gives way to the new request's.
			if _, err := tx.Exec(ctx, `insert into lsm_requests (environment_id, scope, key, request_hash, status, response)
				values ($1::uuid, $2, $3, $4, $5, $6) on conflict (environment_id, scope, key) do update
				set request_hash = excluded.request_hash, status = excluded.status, response = excluded.response,
				    created_at = now()
				where lsm_requests.created_at <= now() - `+requestRetention,
				envID, r.Scope, r.Key, r.Hash, r.Status, body); err != nil {
				return fmt.Errorf("store the response to request %s: %w", r.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return AppliedChange{}, err
	}
	return out, nil
}

// checkInstanceQuota refuses a create when the environment's live
// service instances, with adding more, would pass its
// service_instance_quota. The count is service_instance_counts' row, which
// the insert of a live instance and an instance's termination keep
// (migration 042). A create checks after its insert (adding 0): its
// trigger's update of the row makes a concurrent create in the same
// environment wait for this transaction, so no two of them pass the quota
// together.
func checkInstanceQuota(ctx context.Context, tx querier, envID string, adding int64) error {
	var s Settings
	var live int64
	if err := tx.QueryRow(ctx, `select coalesce((e.settings->>'service_instance_quota')::bigint, 0), coalesce(c.live, 0)
		from environments e left join service_instance_counts c on c.environment_id = e.id
		where e.id = $1::uuid`, envID).Scan(&s.InstanceQuota, &live); err != nil {
		return fmt.Errorf("environment %s: %w", envID, err)
	}
	if quota := s.Instances(); live+adding > quota {
		return Conflict("the environment holds %d live service instances, its service_instance_quota: terminate some, "+
			"or ask a global admin to raise service_instance_quota", quota)
	}
	return nil
}

// CheckInstanceQuota is a create's quota check (checkInstanceQuota) for
// a create's dry-run: nil when one more live instance fits now.
func (s *Store) CheckInstanceQuota(ctx context.Context, envID string) error {
	return checkInstanceQuota(ctx, s.pool, envID, 1)
}

// instanceAt is the instance as the version ch wrote left it, for a
// retry that finds it written: the row when it is still at that version,
// else the row with the state, sets and time of ch's log row. A retry
// answers the request that wrote ch, not a later transfer (a workflow
// task that timed out after its local activities wrote two versions
// retries the first with the second already in PostgreSQL).
func instanceAt(ctx context.Context, tx pgx.Tx, envID string, ch InstanceChange, current int64) (ServiceInstance, error) {
	inst, err := getInstance(ctx, tx, envID, "", ch.ID)
	if err != nil || current == ch.Version {
		return inst, err
	}
	err = tx.QueryRow(ctx, `select state, candidate_attributes, active_attributes, rollback_attributes,
			coalesce(candidate_version, 0), coalesce(active_version, 0), coalesce(rollback_version, 0), created_at
		from service_instance_log
		where environment_id = $1::uuid and instance_id = $2::uuid and version = $3`,
		envID, ch.ID, ch.Version).Scan(&inst.State, &inst.Candidate, &inst.Active, &inst.Rollback,
		&inst.CandidateVersion, &inst.ActiveVersion, &inst.RollbackVersion, &inst.UpdatedAt)
	if err != nil {
		return ServiceInstance{}, fmt.Errorf("service instance %s at version %d: %w", ch.ID, ch.Version, err)
	}
	inst.Version, inst.Deleted = ch.Version, ch.Deleted
	inst.EntityVersion = inst.Sets.EntityVersion()
	return inst, nil
}

func nullIfEmptyJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const instanceColumns = `id::text, entity, coalesce(identity, ''), state, version,
	candidate_attributes, active_attributes, rollback_attributes, deleted, created_at, updated_at,
	coalesce(candidate_version, 0), coalesce(active_version, 0), coalesce(rollback_version, 0)`

// instanceRowColumns are instanceColumns and the metadata, as
// scanInstance reads them (LiveServiceInstances, for the compiles, reads
// instanceColumns: no model sees the metadata).
const instanceRowColumns = instanceColumns + `, metadata`

func scanInstance(row pgx.Row) (ServiceInstance, error) {
	var i ServiceInstance
	err := row.Scan(&i.ID, &i.Entity, &i.Identity, &i.State, &i.Version,
		&i.Candidate, &i.Active, &i.Rollback, &i.Deleted, &i.CreatedAt, &i.UpdatedAt,
		&i.CandidateVersion, &i.ActiveVersion, &i.RollbackVersion, &i.Metadata)
	i.EntityVersion = i.Sets.EntityVersion()
	return i, err
}

// setVersion is the version column of a set: null for an empty set, 1
// for one whose version was not said (written before versions).
func setVersion(set map[string]any, v int) any {
	if set == nil {
		return nil
	}
	return lsm.EntityVersion(v)
}

// getInstance finds an instance by id, or (with entity) by its identity.
func getInstance(ctx context.Context, q querier, envID, entity, ref string) (ServiceInstance, error) {
	var row pgx.Row
	if IsUUID(ref) {
		row = q.QueryRow(ctx, `select `+instanceRowColumns+` from service_instances
			where environment_id = $1::uuid and id = $2::uuid and ($3 = '' or entity = $3)`, envID, ref, entity)
	} else {
		row = q.QueryRow(ctx, `select `+instanceRowColumns+` from service_instances
			where environment_id = $1::uuid and entity = $2 and identity = $3 and not deleted`, envID, entity, ref)
	}
	inst, err := scanInstance(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return inst, NotFound("service instance %s", ref)
	}
	return inst, err
}

// GetInstance returns an instance of entity by its id or its identity.
func (s *Store) GetInstance(ctx context.Context, envID, entity, ref string) (ServiceInstance, error) {
	return getInstance(ctx, s.pool, envID, entity, ref)
}

// ListInstances returns a page of entity's instances in id order, of one
// state when state is not "", deleted ones only when deleted is true.
func (s *Store) ListInstances(ctx context.Context, envID, entity, state string, deleted bool, after string, limit int) ([]ServiceInstance, error) {
	if after == "" {
		after = "00000000-0000-0000-0000-000000000000"
	}
	rows, err := s.pool.Query(ctx, `select `+instanceRowColumns+` from service_instances
		where environment_id = $1::uuid and entity = $2 and ($3 = '' or state = $3) and deleted = $4
		  and id > $5::uuid
		order by id limit $6`, envID, entity, state, deleted, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ServiceInstance, error) { return scanInstance(row) })
}

// InstanceLogEntry is one version of an instance.
type InstanceLogEntry struct {
	Version int64  `json:"version"`
	State   string `json:"state"`
	lsm.Sets
	Event     json.RawMessage `json:"event"`
	Errors    json.RawMessage `json:"errors,omitempty"`
	CreatedAt time.Time       `json:"timestamp"`
}

// InstanceLog returns an instance's log, newest version first.
func (s *Store) InstanceLog(ctx context.Context, envID, instanceID string) ([]InstanceLogEntry, error) {
	return s.InstanceLogPage(ctx, envID, instanceID, 0, 0)
}

// InstanceLogPage is InstanceLog from the version before before on (0:
// the newest), at most limit entries (0: all).
func (s *Store) InstanceLogPage(ctx context.Context, envID, instanceID string, before int64, limit int) ([]InstanceLogEntry, error) {
	rows, err := s.pool.Query(ctx, `select version, state, candidate_attributes, active_attributes, rollback_attributes,
		event, errors, created_at, coalesce(candidate_version, 0), coalesce(active_version, 0),
		coalesce(rollback_version, 0) from service_instance_log
		where environment_id = $1::uuid and instance_id = $2::uuid and ($3 = 0 or version < $3)
		order by version desc limit nullif($4, 0)`, envID, instanceID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (InstanceLogEntry, error) {
		var e InstanceLogEntry
		err := row.Scan(&e.Version, &e.State, &e.Candidate, &e.Active, &e.Rollback, &e.Event, &e.Errors, &e.CreatedAt,
			&e.CandidateVersion, &e.ActiveVersion, &e.RollbackVersion)
		return e, err
	})
}

// StoredResponse is the first response to an idempotent request.
type StoredResponse struct {
	Hash     []byte
	Status   int
	Response json.RawMessage
}

// LookupRequest returns the stored response to the request with key, if
// there is one younger than a day.
func (s *Store) LookupRequest(ctx context.Context, envID, scope, key string) (StoredResponse, bool, error) {
	var r StoredResponse
	err := s.pool.QueryRow(ctx, `select request_hash, status, response from lsm_requests
		where environment_id = $1::uuid and scope = $2 and key = $3 and created_at > now() - `+requestRetention,
		envID, scope, key).
		Scan(&r.Hash, &r.Status, &r.Response)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// requestRetention is how long the first response to an idempotent
// request is kept (SQL).
const requestRetention = `interval '1 day'`

// PruneRequests deletes the stored responses older than their retention,
// DefaultPruneChunk at a time (lsm_requests_created finds them).
func (s *Store) PruneRequests(ctx context.Context) (int64, error) {
	var n int64
	for {
		tag, err := s.pool.Exec(ctx, `delete from lsm_requests where (environment_id, scope, key) in (
			select environment_id, scope, key from lsm_requests where created_at <= now() - `+requestRetention+`
			limit $1)`, DefaultPruneChunk)
		n += tag.RowsAffected()
		if err != nil || tag.RowsAffected() < DefaultPruneChunk {
			return n, err
		}
	}
}

// IsUUID reports whether s is a UUID in its canonical text form.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
			return false
		}
	}
	return true
}
