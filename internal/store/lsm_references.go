package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// Relations between instances (issue 14, B.6; docs/architecture.md,
// "Relations between instances"). An attribute declared with ref=<entity>
// names instances of that entity; service_instance_references holds, per
// live referrer, the instances its three sets name, written in the
// transaction of each of its transfers (ApplyInstanceChange). Two rules
// keep every row pointing at a live instance, race-free:
//
//   - a transfer that brings a new reference locks the target's row FOR
//     SHARE and refuses (an *lsm.AttributeError, the API's 422) a target
//     that is not live: missing, deleted, or in a state that purges;
//   - a transfer that deletes an instance (the on_delete request, a
//     terminal state, or a state that purges) locks its own row FOR
//     UPDATE, as every transfer does, and is refused (a *ReferencedError,
//     the API's 409) while rows name it.
//
// Whichever of two such transactions locks the target first wins; the
// other sees its outcome once it gets the lock (READ COMMITTED re-reads
// a locked row, and each statement sees what committed before it).

// ReferencedError refuses the deletion of an instance that live instances
// reference. It wraps a *ConflictError.
type ReferencedError struct {
	Instance  string
	Referrers []lsm.Referrer
}

func (e *ReferencedError) Error() string {
	parts := make([]string, len(e.Referrers))
	for i, r := range e.Referrers {
		name := r.ID
		if r.Identity != "" {
			name = r.Identity + " (" + r.ID + ")"
		}
		parts[i] = fmt.Sprintf("%s %s (attribute %s)", r.Entity, name, r.Attribute)
	}
	return fmt.Sprintf("service instance %s is referenced by %s: delete those first, or change their references",
		e.Instance, strings.Join(parts, ", "))
}

// Unwrap makes a ReferencedError a *ConflictError (and so an
// ErrConflict) that says what it says.
func (e *ReferencedError) Unwrap() error { return &ConflictError{What: e.Error()} }

// ReferencedBy returns the live instances that reference the instance id,
// one per (referrer, attribute), by entity, id and attribute.
func (s *Store) ReferencedBy(ctx context.Context, envID, id string) ([]lsm.Referrer, error) {
	return referrers(ctx, s.pool, envID, id)
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// referrersSQL is referrers' read ($1 environment, $2 target): the
// references to the target, and each one's referrer looked up by key (a
// lateral subquery the planner keeps apart, offset 0). Joined directly,
// the order by made the planner walk every instance of the environment
// in (entity, id) order while the tables had no statistics yet, once per
// instance create (notifyReferrers; TestReferrersReadTheReferrersAlone).
const referrersSQL = `select i.entity, i.id::text, coalesce(i.identity, ''), r.attribute, i.state
		from service_instance_references r
		cross join lateral (select entity, id, identity, state from service_instances
		                    where environment_id = r.environment_id and id = r.referrer_id offset 0) i
		where r.environment_id = $1::uuid and r.target_id = $2::uuid
		order by i.entity, i.id, r.attribute`

func referrers(ctx context.Context, q queryer, envID, id string) ([]lsm.Referrer, error) {
	rows, err := q.Query(ctx, referrersSQL, envID, id)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lsm.Referrer, error) {
		var r lsm.Referrer
		err := row.Scan(&r.Entity, &r.ID, &r.Identity, &r.Attribute, &r.State)
		return r, err
	})
	if out == nil {
		out = []lsm.Referrer{}
	}
	return out, err
}

// ResolvedReference is a reference with the live instance it names.
type ResolvedReference struct {
	lsm.Reference
	// ID is the instance's id, "" when no live instance has the value.
	ID string
	// Active is the instance's active set (nil: none yet).
	Active map[string]any
	State  string
}

// ResolveReferences resolves refs among the environment's live instances
// (not deleted, in a state that does not purge), by id or identity, without
// locks: what the API checks before it sends a request, and what the
// compiles read for the referrer's related field.
func (s *Store) ResolveReferences(ctx context.Context, envID string, refs []lsm.Reference) ([]ResolvedReference, error) {
	var out []ResolvedReference
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = resolveReferences(ctx, tx, envID, refs, false)
		return err
	})
	return out, err
}

// resolveReferences resolves refs in tx, locking the rows found FOR SHARE
// when lock is set.
func resolveReferences(ctx context.Context, tx pgx.Tx, envID string, refs []lsm.Reference, lock bool) ([]ResolvedReference, error) {
	type found struct {
		id, identity, state string
		deleted, purge      bool
		active              map[string]any
	}
	byEntity := map[string][]found{}
	entities := map[string][2][]string{} // ids, identities
	for _, r := range refs {
		e := entities[r.Entity]
		if IsUUID(r.Value) {
			e[0] = append(e[0], strings.ToLower(r.Value))
		} else {
			e[1] = append(e[1], r.Value)
		}
		entities[r.Entity] = e
	}
	suffix := ""
	if lock {
		suffix = " for share of i"
	}
	for _, entity := range slices.Sorted(mapKeysOf(entities)) {
		e := entities[entity]
		rows, err := tx.Query(ctx, `select i.id::text, coalesce(i.identity, ''), i.state, i.deleted,
			coalesce((s.lifecycle->'states'->i.state->>'purge')::boolean, false), i.active_attributes
			from service_instances i
			join service_entities s on s.environment_id = i.environment_id and s.name = i.entity
			where i.environment_id = $1::uuid and i.entity = $2
			  and (i.id = any($3::uuid[]) or (i.identity = any($4::text[]) and not i.deleted))
			order by i.id`+suffix, envID, entity, e[0], e[1])
		if err != nil {
			return nil, fmt.Errorf("resolve references to %s: %w", entity, err)
		}
		fs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (found, error) {
			var f found
			err := row.Scan(&f.id, &f.identity, &f.state, &f.deleted, &f.purge, &f.active)
			return f, err
		})
		if err != nil {
			return nil, fmt.Errorf("resolve references to %s: %w", entity, err)
		}
		byEntity[entity] = fs
	}
	out := make([]ResolvedReference, len(refs))
	for i, r := range refs {
		out[i].Reference = r
		for _, f := range byEntity[r.Entity] {
			if f.deleted || f.purge {
				continue
			}
			if f.id == strings.ToLower(r.Value) || (f.identity != "" && f.identity == r.Value) {
				out[i].ID, out[i].Active, out[i].State = f.id, f.active, f.state
				break
			}
		}
	}
	return out, nil
}

func mapKeysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// NoSuchInstance is the attribute problem of a reference that names no
// live instance.
func NoSuchInstance(r lsm.Reference) lsm.AttributeProblem { return lsm.NoSuchInstance(r) }

// referencePlan is what checkReferences decided for a transfer: the rows
// the referrer has after it (write replaces them).
type referencePlan struct {
	// had: the instance had rows before; rows: what it has after.
	had  bool
	rows [][2]string // attribute, target id
}

// checkReferences runs in ApplyInstanceChange's transaction, before the
// instance's row is written (the row is locked): it refuses the deletion
// of a referenced instance, resolves and locks the targets of the
// references the change brings, and returns the rows to write (nil: the
// instance has no references, before or after).
func checkReferences(ctx context.Context, tx pgx.Tx, envID string, ch InstanceChange) (*referencePlan, error) {
	var specsJSON []byte
	var had, referenced bool
	var purge bool
	if err := tx.QueryRow(ctx, `select
		(select coalesce(jsonb_agg(a), '[]'::jsonb) from service_entities e,
		      jsonb_array_elements(case jsonb_typeof(e.attributes) when 'array' then e.attributes else '[]' end) a
		 where e.environment_id = $1::uuid and e.name = $2 and a ? 'references'),
		exists (select 1 from service_instance_references where environment_id = $1::uuid and referrer_id = $3::uuid),
		exists (select 1 from service_instance_references where environment_id = $1::uuid and target_id = $3::uuid),
		coalesce((select (lifecycle->'states'->$4->>'purge')::boolean from service_entities
		          where environment_id = $1::uuid and name = $2), false)`,
		envID, ch.Entity, ch.ID, ch.State).Scan(&specsJSON, &had, &referenced, &purge); err != nil {
		return nil, fmt.Errorf("references of %s: %w", ch.ID, err)
	}
	if referenced && (ch.Deleted || ch.Delete || purge) {
		rs, err := referrers(ctx, tx, envID, ch.ID)
		if err != nil {
			return nil, err
		}
		return nil, &ReferencedError{Instance: ch.ID, Referrers: rs}
	}
	var specs []lsm.AttributeSpec
	if err := json.Unmarshal(specsJSON, &specs); err != nil {
		return nil, fmt.Errorf("reference attributes of %s: %w", ch.Entity, err)
	}
	if ch.Deleted || len(specs) == 0 {
		if !had {
			return nil, nil
		}
		return &referencePlan{had: true}, nil
	}
	refs := lsm.SetsReferences(specs, ch.Sets)
	if len(refs) == 0 && !had {
		return nil, nil
	}
	// The references the instance held before need no check: their
	// targets cannot have gone while referenced.
	old := map[lsm.Reference]bool{}
	if ch.Version > 1 {
		var before lsm.Sets
		if err := tx.QueryRow(ctx, `select candidate_attributes, active_attributes, rollback_attributes
			from service_instances where environment_id = $1::uuid and id = $2::uuid`, envID, ch.ID).
			Scan(&before.Candidate, &before.Active, &before.Rollback); err != nil {
			return nil, fmt.Errorf("references of %s: %w", ch.ID, err)
		}
		for _, r := range lsm.SetsReferences(specs, before) {
			old[r] = true
		}
	}
	resolved, err := resolveReferences(ctx, tx, envID, refs, true)
	if err != nil {
		return nil, err
	}
	plan := &referencePlan{had: had}
	var problems []lsm.AttributeProblem
	seen := map[[2]string]bool{}
	for _, r := range resolved {
		switch {
		case r.ID == strings.ToLower(ch.ID):
			if !old[r.Reference] {
				problems = append(problems, lsm.AttributeProblem{Attribute: r.Attribute, Reason: lsm.ReasonNoSuchInstance,
					Detail: fmt.Sprintf("names the instance itself (%q): an instance cannot reference itself", r.Value)})
			}
			continue
		case r.ID == "":
			if !old[r.Reference] {
				problems = append(problems, NoSuchInstance(r.Reference))
			}
			continue
		}
		row := [2]string{r.Attribute, r.ID}
		if !seen[row] {
			seen[row] = true
			plan.rows = append(plan.rows, row)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("service instance %s: %w", ch.ID, lsm.NewAttributeError(problems))
	}
	return plan, nil
}

// write replaces the referrer's rows with the plan's; the instance's row
// exists.
func (p *referencePlan) write(ctx context.Context, tx pgx.Tx, envID, id string) error {
	if p == nil {
		return nil
	}
	if p.had {
		if _, err := tx.Exec(ctx, `delete from service_instance_references
			where environment_id = $1::uuid and referrer_id = $2::uuid`, envID, id); err != nil {
			return fmt.Errorf("references of %s: %w", id, err)
		}
	}
	if len(p.rows) == 0 {
		return nil
	}
	attrs, targets := make([]string, len(p.rows)), make([]string, len(p.rows))
	for i, r := range p.rows {
		attrs[i], targets[i] = r[0], r[1]
	}
	_, err := tx.Exec(ctx, `insert into service_instance_references (environment_id, referrer_id, attribute, target_id)
		select $1::uuid, $2::uuid, a, t::uuid from unnest($3::text[], $4::text[]) as x(a, t)`, envID, id, attrs, targets)
	if err != nil {
		return fmt.Errorf("references of %s: %w", id, err)
	}
	return nil
}

// IsAttributeError reports whether err refuses attributes (a reference
// that names no live instance), and returns them.
func IsAttributeError(err error) (*lsm.AttributeError, bool) {
	var ae *lsm.AttributeError
	ok := errors.As(err, &ae)
	return ae, ok
}

// EntityAttributes returns the attributes of an entity of the catalog.
func (s *Store) EntityAttributes(ctx context.Context, envID, entity string) ([]lsm.AttributeSpec, error) {
	var specs []lsm.AttributeSpec
	err := s.pool.QueryRow(ctx, `select attributes from service_entities where environment_id = $1::uuid and name = $2`,
		envID, entity).Scan(&specs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("service entity %s", entity)
	}
	return specs, err
}
