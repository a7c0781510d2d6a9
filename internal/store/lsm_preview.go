package store

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/lsm"
)

// CompareSets compares, per resource set, the resources proposed for it
// with the set in the released version (the newest when none is
// released) and returns that version (0 when there is none) and each
// set's comparison. It only reads, in one snapshot: nothing is stored (a
// preview of a model over every live service instance, which must leave
// no trace; CreateInstanceDryrun stores the proposed contents for its
// dry-run on the targets).
func (s *Store) CompareSets(ctx context.Context, envID string, proposed map[string][]intent.Resource) (int64, map[string]lsm.SetComparison, error) {
	out := make(map[string]lsm.SetComparison, len(proposed))
	var base int64
	sets := make([]string, 0, len(proposed))
	for set, rs := range proposed {
		for i := range rs {
			if rs[i].ResourceSet != set {
				return 0, nil, fmt.Errorf("resource %s is in set %q, not %q", rs[i].ID, rs[i].ResourceSet, set)
			}
		}
		sets = append(sets, set)
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var released *int64
		var last int64
		if err := tx.QueryRow(ctx, `select released_version, last_version from environments where id = $1::uuid`, envID).
			Scan(&released, &last); err != nil {
			return err
		}
		base = last
		if released != nil {
			base = *released
		}
		type row struct {
			set, id string
			hash    []byte
		}
		rows, err := tx.Query(ctx, `select resource_set, resource_id, hash from version_resources
			where environment_id = $1::uuid and resource_set = any($2::text[])
			  and first_version <= $3 and (last_version is null or last_version > $3)`, envID, sets, base)
		if err != nil {
			return err
		}
		current := map[string]map[string][]byte{}
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.set, &r.id, &r.hash); err != nil {
				rows.Close()
				return err
			}
			if current[r.set] == nil {
				current[r.set] = map[string][]byte{}
			}
			current[r.set][r.id] = r.hash
		}
		if err := rows.Err(); err != nil {
			return err
		}
		type pending struct {
			set  string
			id   string
			old  []byte
			next storedContent
		}
		var modified []pending
		var oldHashes [][]byte
		for _, set := range sets {
			cmp := lsm.SetComparison{Added: []string{}, Removed: []string{}, Modified: []intent.ModifiedResource{}}
			have := current[set]
			seen := make(map[string]bool, len(proposed[set]))
			for i := range proposed[set] {
				r := &proposed[set][i]
				id, h := r.ID.String(), r.Hash()
				seen[id] = true
				switch old, ok := have[id]; {
				case !ok:
					cmp.Added = append(cmp.Added, id)
				case bytes.Equal(old, h[:]):
					cmp.Unchanged++
				default:
					modified = append(modified, pending{set: set, id: id, old: old, next: contentOf(r)})
					oldHashes = append(oldHashes, old)
				}
			}
			for id := range have {
				if !seen[id] {
					cmp.Removed = append(cmp.Removed, id)
				}
			}
			out[set] = cmp
		}
		if len(modified) == 0 {
			return nil
		}
		stored, err := loadContents(ctx, tx, envID, oldHashes)
		if err != nil {
			return err
		}
		for _, m := range modified {
			old, ok := stored[string(m.old)]
			if !ok {
				return fmt.Errorf("contents of %s are missing", m.id) // the foreign key makes this unreachable
			}
			changes, err := diffContents(old, m.next)
			if err != nil {
				return fmt.Errorf("compare %s: %w", m.id, err)
			}
			cmp := out[m.set]
			cmp.Modified = append(cmp.Modified, intent.ModifiedResource{ID: m.id, Changes: changes})
			out[m.set] = cmp
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	for set, cmp := range out {
		sort.Strings(cmp.Added)
		sort.Strings(cmp.Removed)
		sort.Slice(cmp.Modified, func(a, b int) bool { return cmp.Modified[a].ID < cmp.Modified[b].ID })
		out[set] = cmp
	}
	return base, out, nil
}

// contentOf is a resource's content as the store would keep it (contentRow),
// for a comparison with a stored one without storing it.
func contentOf(r *intent.Resource) storedContent {
	req := make([]string, len(r.Requires))
	for i, q := range r.Requires {
		req[i] = q.String()
	}
	c := storedContent{attributes: r.CanonicalAttributes(), requires: req, purged: r.Purged, sendEvent: r.SendEvent,
		receiveEvents: r.ReceiveEvents, reportOnly: r.ReportOnly, undefined: r.Undefined,
		unmanaged: r.Unmanaged}
	if r.ResourceSet != "" {
		set := r.ResourceSet
		c.resourceSet = &set
	}
	return c
}
