package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// Allocation of r attributes from pools (issue 31; docs/lsm.md,
// "Allocation"). The catalog holds the model's pools (lsm_pools, written
// with the entities by PutModel or at a staged model's release); a create
// (ApplyInstanceChange at version 1) gives every attribute declared
// @lsm(r, allocate=<pool>) the lowest free value of its pool, in its own
// transaction, under the pool row's lock (so replicas creating at once
// take turns per pool), writes it into the candidate set and records it
// in lsm_allocations, whose keys refuse a value given twice whatever
// happens. The transfer that terminates the instance (Deleted) releases
// its values in its transaction.

// PoolUsage is a pool of the catalog with how much of it is given.
type PoolUsage struct {
	lsm.Pool
	// Values is how many values the pool has, Used how many live
	// instances hold, Free the rest.
	Values int64 `json:"values"`
	Used   int64 `json:"used"`
	Free   int64 `json:"free"`
}

// Allocation is one value of a pool given to an instance.
type Allocation struct {
	// Value is the value as the instance holds it (a number or a
	// string).
	Value       any       `json:"value"`
	Entity      string    `json:"service_entity"`
	InstanceID  string    `json:"instance_id"`
	Attribute   string    `json:"attribute"`
	AllocatedAt time.Time `json:"allocated_at"`
}

// ListPools returns the environment's pools, sorted by name, with their
// usage.
func (s *Store) ListPools(ctx context.Context, envID string) ([]PoolUsage, error) {
	rows, err := s.pool.Query(ctx, `select p.definition, (select count(*) from lsm_allocations a
			where a.environment_id = p.environment_id and a.pool = p.name)
		from lsm_pools p where p.environment_id = $1::uuid order by p.name`, envID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (PoolUsage, error) {
		var u PoolUsage
		if err := row.Scan(&u.Pool, &u.Used); err != nil {
			return u, err
		}
		u.Values = u.Count()
		u.Free = u.Values - u.Used
		return u, nil
	})
}

// GetPool returns one pool with its usage and its allocations, sorted by
// value (by ordinal), at most limit of them after the value after (""
// from the first), and whether more follow.
func (s *Store) GetPool(ctx context.Context, envID, name, after string, limit int) (PoolUsage, []Allocation, bool, error) {
	var u PoolUsage
	err := s.pool.QueryRow(ctx, `select p.definition, (select count(*) from lsm_allocations a
			where a.environment_id = p.environment_id and a.pool = p.name)
		from lsm_pools p where p.environment_id = $1::uuid and p.name = $2`, envID, name).Scan(&u.Pool, &u.Used)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, nil, false, NotFound("pool %s", name)
	}
	if err != nil {
		return u, nil, false, err
	}
	u.Values = u.Count()
	u.Free = u.Values - u.Used
	from := ""
	if after != "" {
		o, _, ok := u.Ordinal(poolValue(u.Pool, after))
		if !ok {
			return u, nil, false, &PoolValueError{Pool: name, Describe: u.Describe(), Value: after}
		}
		from = o.String()
	}
	rows, err := s.pool.Query(ctx, `select a.value, i.entity, a.instance_id::text, a.attribute, a.allocated_at
		from lsm_allocations a join service_instances i on i.environment_id = a.environment_id and i.id = a.instance_id
		where a.environment_id = $1::uuid and a.pool = $2 and ($3::text = '' or a.ordinal > nullif($3::text, '')::numeric)
		order by a.ordinal limit $4`, envID, name, from, limit+1)
	if err != nil {
		return u, nil, false, err
	}
	allocs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Allocation, error) {
		var a Allocation
		var text string
		err := row.Scan(&text, &a.Entity, &a.InstanceID, &a.Attribute, &a.AllocatedAt)
		a.Value = poolValue(u.Pool, text)
		return a, err
	})
	if err != nil {
		return u, nil, false, err
	}
	more := len(allocs) > limit
	if more {
		allocs = allocs[:limit]
	}
	return u, allocs, more, nil
}

// poolValue is a value's text as an instance holds the value: a number
// for an integer pool, the string for a cidr pool.
func poolValue(p lsm.Pool, text string) any {
	if p.Integer() {
		return json.Number(text)
	}
	return text
}

// PoolValueError is a value that is not one of a pool's (GetPool's
// after).
type PoolValueError struct{ Pool, Describe, Value string }

func (e *PoolValueError) Error() string {
	return fmt.Sprintf("%q is not a value of pool %s (%s)", e.Value, e.Pool, e.Describe)
}

// allocated is a value allocate chose, to be recorded once the instance
// row exists.
type allocated struct {
	pool, attribute, value, ordinal string
}

// allocatedSpecs are the attributes of an entity version that are
// allocated from pools, sorted by pool then attribute (the order their
// pools are locked in, so that two creates never wait for each other in
// a circle).
func allocatedSpecs(ctx context.Context, tx pgx.Tx, envID, entity string, version int) ([]lsm.AttributeSpec, error) {
	var specs []lsm.AttributeSpec
	err := tx.QueryRow(ctx, `select coalesce((select attributes from service_entity_versions
			where environment_id = $1::uuid and entity = $2 and version = $3),
		(select attributes from service_entities where environment_id = $1::uuid and name = $2))`,
		envID, entity, lsm.EntityVersion(version)).Scan(&specs)
	if err != nil {
		return nil, fmt.Errorf("service entity %s: %w", entity, err)
	}
	specs = slices.DeleteFunc(specs, func(a lsm.AttributeSpec) bool { return !a.Allocated() })
	slices.SortFunc(specs, func(a, b lsm.AttributeSpec) int {
		if c := strings.Compare(a.Allocate, b.Allocate); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return specs, nil
}

// allocate gives each allocated attribute of a create's candidate set
// that has no value the lowest free value of its pool, in tx, and
// returns the candidate set with them and what to record (record). An
// exhausted pool is a *ConflictError naming it: nothing is written.
func allocate(ctx context.Context, tx pgx.Tx, envID string, ch InstanceChange) (map[string]any, []allocated, error) {
	specs, err := allocatedSpecs(ctx, tx, envID, ch.Entity, ch.Sets.CandidateVersion)
	if err != nil {
		return nil, nil, err
	}
	return chooseValues(ctx, tx, envID, ch, specs, true)
}

// chooseValues is allocate's choice, each pool row locked for update
// (lock) or only read (a preview, in a read-only transaction: it holds
// no lock, so another create may take the values it chose first).
// specs are the entity version's allocated attributes (allocatedSpecs).
func chooseValues(ctx context.Context, tx pgx.Tx, envID string, ch InstanceChange, specs []lsm.AttributeSpec, lock bool) (map[string]any, []allocated, error) {
	if len(specs) == 0 {
		return ch.Sets.Candidate, nil, nil
	}
	poolQuery := `select definition, coalesce(free_from::text, '') from lsm_pools where environment_id = $1::uuid and name = $2`
	if lock {
		poolQuery += ` for update`
	}
	cand := maps.Clone(ch.Sets.Candidate)
	if cand == nil {
		cand = map[string]any{}
	}
	var out []allocated
	for _, spec := range specs {
		if _, given := cand[spec.Name]; given {
			continue
		}
		var p lsm.Pool
		var freeFrom string
		err := tx.QueryRow(ctx, poolQuery, envID, spec.Allocate).Scan(&p, &freeFrom)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, Conflict("attribute %s of %s is allocated from pool %s, which the catalog does not have", spec.Name, ch.Entity, spec.Allocate)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("lock pool %s: %w", spec.Allocate, err)
		}
		// Values this call chose already (two attributes of one pool)
		// are not recorded yet: they count as given, and the search
		// goes on past them.
		from := p.First()
		if f, ok := new(big.Int).SetString(freeFrom, 10); ok && f.Cmp(from) > 0 {
			from = f
		}
		for _, a := range out {
			if o, _ := new(big.Int).SetString(a.ordinal, 10); a.pool == p.Name && o.Cmp(from) >= 0 {
				from = o.Add(o, p.Step())
			}
		}
		o, err := lowestFree(ctx, tx, envID, p, from)
		if err != nil {
			return nil, nil, fmt.Errorf("allocate from pool %s: %w", p.Name, err)
		}
		if o == nil {
			return nil, nil, &PoolExhaustedError{Pool: p.Name, Describe: p.Describe(), Size: p.Count(), Entity: ch.Entity, Attribute: spec.Name}
		}
		v, text := p.Value(o)
		cand[spec.Name] = v
		out = append(out, allocated{pool: p.Name, attribute: spec.Name, value: text, ordinal: o.String()})
		if lock {
			// No value below the one taken is free (it was the lowest).
			next := new(big.Int).Add(o, p.Step())
			if _, err := tx.Exec(ctx, `update lsm_pools set free_from = $3::text::numeric
				where environment_id = $1::uuid and name = $2`, envID, p.Name, next.String()); err != nil {
				return nil, nil, fmt.Errorf("pool %s: %w", p.Name, err)
			}
		}
	}
	return cand, out, nil
}

// lowestFree is the ordinal of pool p's lowest value at from or after it
// that no instance holds (nil: none is left up to the pool's last). Every
// value given is one of the pool's (poolChanges keeps it so), so from an
// ordinal that is taken it walks the values given in a row after it, in
// the primary key's order, and stops at the first whose successor is
// free: the run's length, not the pool's values given, is what it costs.
func lowestFree(ctx context.Context, tx pgx.Tx, envID string, p lsm.Pool, from *big.Int) (*big.Int, error) {
	if from.Cmp(p.Last()) > 0 {
		return nil, nil
	}
	var ord *string
	err := tx.QueryRow(ctx, `select case
			when not exists (select 1 from lsm_allocations where environment_id = $1::uuid and pool = $2 and ordinal = $3::text::numeric)
			then $3::text
			else (select (a.ordinal + $4::text::numeric)::text from lsm_allocations a
				where a.environment_id = $1::uuid and a.pool = $2 and a.ordinal >= $3::text::numeric
				  and not exists (select 1 from lsm_allocations b
					where b.environment_id = $1::uuid and b.pool = $2 and b.ordinal = a.ordinal + $4::text::numeric)
				order by a.ordinal limit 1)
			end`, envID, p.Name, from.String(), p.Step().String()).Scan(&ord)
	if err != nil {
		return nil, err
	}
	if ord == nil {
		return nil, nil
	}
	o, ok := new(big.Int).SetString(*ord, 10)
	if !ok {
		return nil, fmt.Errorf("ordinal %q", *ord)
	}
	if o.Cmp(p.Last()) > 0 {
		return nil, nil
	}
	return o, nil
}

// PreviewedValue is a value a create would be given now for one of its
// allocated attributes (PreviewAllocation).
type PreviewedValue struct {
	Attribute, Pool string
	// Value is the value as the instance would hold it (a number or a
	// string).
	Value any
}

// PreviewAllocation is what a create of entity whose candidate set is
// cand, of entity version version (as the create's sets name it), would be given
// by allocation now: for each allocated attribute cand lacks, the lowest
// free value of its pool, as allocate chooses it (ordered as it locks
// the pools: by pool, then attribute). It reads in a read-only
// transaction and neither locks nor writes anything, so the values are
// provisional: another create may take them first. An exhausted pool is
// the create's *PoolExhaustedError, a pool the catalog lacks its
// *ConflictError; an entity that allocates nothing gives none.
func (s *Store) PreviewAllocation(ctx context.Context, envID, entity string, version int, cand map[string]any) ([]PreviewedValue, error) {
	var out []PreviewedValue
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		ch := InstanceChange{Entity: entity, Sets: lsm.Sets{Candidate: cand, CandidateVersion: version}}
		specs, err := allocatedSpecs(ctx, tx, envID, entity, version)
		if err != nil {
			return err
		}
		next, chosen, err := chooseValues(ctx, tx, envID, ch, specs, false)
		if err != nil {
			return err
		}
		out = make([]PreviewedValue, len(chosen))
		for i, a := range chosen {
			out[i] = PreviewedValue{Attribute: a.attribute, Pool: a.pool, Value: next[a.attribute]}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PoolExhaustedError refuses a create whose pool has no free value. It
// is a *ConflictError to whoever asks (errors.As): the request conflicts
// with the values the environment's instances hold.
type PoolExhaustedError struct {
	Pool, Describe    string
	Size              int64
	Entity, Attribute string
}

func (e *PoolExhaustedError) Error() string { return e.conflict().Error() }

func (e *PoolExhaustedError) conflict() *ConflictError {
	held := fmt.Sprintf("its %d values are allocated", e.Size)
	if e.Size == 1 {
		held = "its one value is allocated"
	}
	return &ConflictError{What: fmt.Sprintf("pool %s (%s) is exhausted: %s, none is left for attribute %s of %s "+
		"(terminate an instance that holds one, or widen the pool in the model)", e.Pool, e.Describe, held, e.Attribute, e.Entity)}
}

// Unwrap makes a PoolExhaustedError an ErrConflict.
func (e *PoolExhaustedError) Unwrap() error { return ErrConflict }

// As makes a *PoolExhaustedError a *ConflictError too.
func (e *PoolExhaustedError) As(target any) bool {
	if ce, ok := target.(**ConflictError); ok {
		*ce = e.conflict()
		return true
	}
	return false
}

// recordAllocations writes the values allocate chose for instance id.
func recordAllocations(ctx context.Context, tx pgx.Tx, envID, id string, allocs []allocated) error {
	for _, a := range allocs {
		if _, err := tx.Exec(ctx, `insert into lsm_allocations (environment_id, pool, value, ordinal, instance_id, attribute)
			values ($1::uuid, $2, $3, $4::text::numeric, $5::uuid, $6)`, envID, a.pool, a.value, a.ordinal, id, a.attribute); err != nil {
			return fmt.Errorf("record value %s of pool %s: %w", a.value, a.pool, err)
		}
	}
	return nil
}

// releaseAllocations gives the values of a terminated instance back.
//
// It locks the pools of the values first, in name order as a create
// locks them: the delete's trigger (migration 043) lowers their
// free_from, and a create holding one pool while it waits for another
// must not find this transaction holding that one and waiting for its.
func releaseAllocations(ctx context.Context, tx pgx.Tx, envID, id string) error {
	if _, err := tx.Exec(ctx, `select 1 from lsm_pools where environment_id = $1::uuid and name in
			(select pool from lsm_allocations where environment_id = $1::uuid and instance_id = $2::uuid)
		order by name for update`, envID, id); err != nil {
		return fmt.Errorf("lock the pools of service instance %s: %w", id, err)
	}
	_, err := tx.Exec(ctx, `delete from lsm_allocations where environment_id = $1::uuid and instance_id = $2::uuid`, envID, id)
	return err
}

// withoutAllocated is a create's candidate set without the attributes
// the server allocates, for comparing a retried create with the one
// written (which has them).
func withoutAllocated(ctx context.Context, tx pgx.Tx, envID string, ch InstanceChange) (map[string]any, []string, error) {
	specs, err := allocatedSpecs(ctx, tx, envID, ch.Entity, ch.Sets.CandidateVersion)
	if err != nil || len(specs) == 0 {
		return ch.Sets.Candidate, []string{}, err // not nil: jsonb - null is null
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	if ch.Sets.Candidate == nil {
		return nil, names, nil
	}
	out := maps.Clone(ch.Sets.Candidate)
	for _, n := range names {
		delete(out, n)
	}
	return out, names, nil
}

// registerCatalog makes entities and pools the environment's catalog, in
// tx (which holds the environment's lock), every breaking change of
// either refused at once (a *BreakingChangesError; the caller's
// transaction then writes nothing).
func registerCatalog(ctx context.Context, tx pgx.Tx, envID, modelHash string, entities []lsm.Entity, pools []lsm.Pool) error {
	poolBreaks, err := poolChanges(ctx, tx, envID, pools)
	if err != nil {
		return err
	}
	if err := registerEntities(ctx, tx, envID, modelHash, entities); err != nil {
		if be, ok := errors.AsType[*BreakingChangesError](err); ok {
			be.Changes = append(be.Changes, poolBreaks...)
		}
		return err
	}
	if len(poolBreaks) > 0 {
		return &BreakingChangesError{Changes: poolBreaks}
	}
	return writePools(ctx, tx, envID, pools)
}

// writePools makes pools the environment's, in tx, once poolChanges
// found nothing they break.
func writePools(ctx context.Context, tx pgx.Tx, envID string, pools []lsm.Pool) error {
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		def, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `insert into lsm_pools (environment_id, name, definition) values ($1::uuid, $2, $3)
			on conflict (environment_id, name) do update set definition = excluded.definition,
			  updated_at = case when lsm_pools.definition = excluded.definition then lsm_pools.updated_at else now() end,
			  free_from = case when lsm_pools.definition = excluded.definition then lsm_pools.free_from end`,
			envID, p.Name, def); err != nil {
			return fmt.Errorf("register pool %s: %w", p.Name, err)
		}
		names = append(names, p.Name)
	}
	_, err := tx.Exec(ctx, `delete from lsm_pools where environment_id = $1::uuid and not (name = any($2))`, envID, names)
	return err
}

// poolChanges lists how pools would take values from live instances: a
// pool removed while it has values given, or changed so that a given
// value is no longer one of its values. It locks the environment's pool
// rows first, so that no create allocates from a pool while its new
// definition is checked.
func poolChanges(ctx context.Context, tx pgx.Tx, envID string, pools []lsm.Pool) ([]BreakingChange, error) {
	if _, err := tx.Exec(ctx, `select 1 from lsm_pools where environment_id = $1::uuid order by name for update`, envID); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `select a.pool, a.value, a.attribute, i.entity, a.instance_id::text
		from lsm_allocations a join service_instances i on i.environment_id = a.environment_id and i.id = a.instance_id
		where a.environment_id = $1::uuid order by a.pool, a.ordinal`, envID)
	if err != nil {
		return nil, err
	}
	type given struct{ pool, value, attribute, entity, id string }
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (given, error) {
		var g given
		err := row.Scan(&g.pool, &g.value, &g.attribute, &g.entity, &g.id)
		return g, err
	})
	if err != nil {
		return nil, err
	}
	byName := map[string]lsm.Pool{}
	for _, p := range pools {
		byName[p.Name] = p
	}
	var out []BreakingChange
	add := func(c BreakingChange, id string) {
		for i := range out {
			if out[i].Entity == c.Entity && out[i].Attribute == c.Attribute && out[i].Pool == c.Pool && out[i].Change == c.Change {
				if !slices.Contains(out[i].Instances, id) {
					out[i].Instances = append(out[i].Instances, id)
				}
				return
			}
		}
		c.Instances = []string{id}
		out = append(out, c)
	}
	for _, g := range all {
		p, ok := byName[g.pool]
		if !ok {
			add(BreakingChange{Entity: g.entity, Attribute: g.attribute, Pool: g.pool, Change: "removed_pool",
				Detail: fmt.Sprintf("pool %s was removed, and live instances hold values of it (attribute %s)", g.pool, g.attribute)}, g.id)
			continue
		}
		if _, _, fits := p.Ordinal(poolValue(p, g.value)); !fits {
			add(BreakingChange{Entity: g.entity, Attribute: g.attribute, Pool: g.pool, Change: "shrunk_pool",
				Detail: fmt.Sprintf("pool %s is now %s, without values live instances hold (attribute %s, e.g. %s)", g.pool, p.Describe(), g.attribute, g.value)}, g.id)
		}
	}
	return out, nil
}
