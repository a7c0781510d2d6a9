package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// AllocateForVersion gives the candidate set cand of instance id,
// mapped to version of its entity by a migration, the values of the
// version's allocated attributes (docs/lsm.md, "Allocation"), in one
// transaction, before the migration's validation reads them:
//
//   - an attribute the instance holds a value of the same pool for gets
//     that value (a value the migration mapped is overwritten: the
//     server chooses allocated values);
//   - else a value the migration mapped that the instance holds in that
//     pool for another attribute (a renamed attribute) is kept;
//   - else the attribute gets the lowest free value of its pool, as a
//     create does, recorded against the instance at once.
//
// It is idempotent: a retry finds the values held. An attribute the
// instance holds a value of another pool for is a *ConflictError (one
// attribute holds one value; the version would need a second), and an
// exhausted pool a *PoolExhaustedError: nothing is taken then.
func (s *Store) AllocateForVersion(ctx context.Context, envID, entity, id string, version int, cand map[string]any) (map[string]any, error) {
	var out map[string]any
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		specs, err := allocatedSpecs(ctx, tx, envID, entity, version)
		if err != nil || len(specs) == 0 {
			out = cand
			return err
		}
		type held struct{ pool, value, ordinal string }
		rows, err := tx.Query(ctx, `select attribute, pool, value, ordinal::text from lsm_allocations
			where environment_id = $1::uuid and instance_id = $2::uuid`, envID, id)
		if err != nil {
			return err
		}
		holds := map[string]held{}
		var attr string
		var h held
		if _, err := pgx.ForEachRow(rows, []any{&attr, &h.pool, &h.value, &h.ordinal}, func() error {
			holds[attr] = h
			return nil
		}); err != nil {
			return fmt.Errorf("values held by service instance %s: %w", id, err)
		}
		target := map[string]bool{}
		for _, spec := range specs {
			target[spec.Name] = true
		}
		next := maps.Clone(cand)
		if next == nil {
			next = map[string]any{}
		}
		for _, spec := range specs {
			if h, ok := holds[spec.Name]; ok {
				if h.pool != spec.Allocate {
					return Conflict("attribute %s of service instance %s holds value %s of pool %s, and version %d of %s allocates it from pool %s: "+
						"an attribute holds one value (keep the pool, or allocate the new version's attribute under another name)",
						spec.Name, id, h.value, h.pool, version, entity, spec.Allocate)
				}
				v, err := heldValue(ctx, tx, envID, h.pool, h.ordinal)
				if err != nil {
					return err
				}
				next[spec.Name] = v
				continue
			}
			mapped, has := next[spec.Name]
			kept := false
			for other, h := range holds {
				if has && !target[other] && h.pool == spec.Allocate && h.value == fmt.Sprint(mapped) {
					kept = true
				}
			}
			if !kept {
				delete(next, spec.Name) // allocate fills it
			}
		}
		next, allocs, err := chooseValues(ctx, tx, envID, InstanceChange{Entity: entity, ID: id,
			Sets: lsm.Sets{Candidate: next, CandidateVersion: version}}, specs, true)
		if err != nil {
			return err
		}
		if err := recordAllocations(ctx, tx, envID, id, allocs); err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// heldValue is the value of ordinal in pool, as an instance holds it.
func heldValue(ctx context.Context, tx pgx.Tx, envID, pool, ordinal string) (any, error) {
	var p lsm.Pool
	err := tx.QueryRow(ctx, `select definition from lsm_pools where environment_id = $1::uuid and name = $2`,
		envID, pool).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Conflict("pool %s is no longer in the catalog", pool)
	}
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", pool, err)
	}
	o, ok := new(big.Int).SetString(ordinal, 10)
	if !ok {
		return nil, fmt.Errorf("pool %s: ordinal %q", pool, ordinal)
	}
	v, _ := p.Value(o)
	return v, nil
}
