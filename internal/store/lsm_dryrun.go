package store

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
)

// InstanceDryrun is what a service instance's proposed resources would
// change: against the desired state (the set as the base version holds
// it), and, through Run, on the targets.
type InstanceDryrun struct {
	// BaseVersion is the version compared with: the released one (the
	// newest when none is released; 0 when there is none).
	BaseVersion int64 `json:"base_version"`
	// Added, Removed and Unchanged are resource ids, sorted; Modified the
	// resources whose intent would differ, with each changed attribute.
	Added     []string                  `json:"added"`
	Removed   []string                  `json:"removed"`
	Modified  []intent.ModifiedResource `json:"modified"`
	Unchanged []string                  `json:"unchanged"`
	// Run is the dry-run of the proposed resources on the targets (every
	// one of them, so that drift shows too); nil when there are none.
	Run *DeployRun `json:"dryrun,omitempty"`
}

// CreateInstanceDryrun compares rs, the resources a service instance's
// set (<entity>/<id>) would hold, with the set in the released version,
// and records a dry-run of rs on the targets: the contents are stored
// (content-addressed, as an export stores them) and listed in
// dryrun_resources, which the run's plan reads instead of a version's
// membership. Nothing else changes: no version, no deploy state. The run
// counts towards MaxActiveDryruns (ErrBusy); its workflow is started by
// the caller, as for CreateDryrun.
func (s *Store) CreateInstanceDryrun(ctx context.Context, envID, set string, rs []intent.Resource, reason string) (InstanceDryrun, error) {
	out := InstanceDryrun{Added: []string{}, Removed: []string{}, Modified: []intent.ModifiedResource{}, Unchanged: []string{}}
	for i := range rs {
		if rs[i].ResourceSet != set {
			return out, fmt.Errorf("resource %s is in set %q, not %q", rs[i].ID, rs[i].ResourceSet, set)
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			if err := dryrunSlot(ctx, tx, e); err != nil {
				return err
			}
		}
		switch {
		case e.ReleasedVersion != nil:
			out.BaseVersion = *e.ReleasedVersion
		default:
			out.BaseVersion = e.LastVersion
		}
		current := map[string][]byte{}
		rows, err := tx.Query(ctx, `select resource_id, hash from version_resources
			where environment_id = $1::uuid and resource_set = $2
			  and first_version <= $3 and (last_version is null or last_version > $3)`, envID, set, out.BaseVersion)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			var h []byte
			if err := rows.Scan(&id, &h); err != nil {
				rows.Close()
				return err
			}
			current[id] = h
		}
		if err := rows.Err(); err != nil {
			return err
		}

		contents := make([][]any, 0, len(rs))
		overlay := make([][]any, 0, len(rs))
		var modified [][2][]byte
		var modifiedIDs []string
		proposed := make(map[string]bool, len(rs))
		for i := range rs {
			r := &rs[i]
			id, h := r.ID.String(), r.Hash()
			proposed[id] = true
			contents = append(contents, contentRow(r, h[:]))
			overlay = append(overlay, []any{envID, int64(0), id, r.ID.Agent, h[:]})
			switch old, ok := current[id]; {
			case !ok:
				out.Added = append(out.Added, id)
			case bytes.Equal(old, h[:]):
				out.Unchanged = append(out.Unchanged, id)
			default:
				modified = append(modified, [2][]byte{old, h[:]})
				modifiedIDs = append(modifiedIDs, id)
			}
		}
		for id := range current {
			if !proposed[id] {
				out.Removed = append(out.Removed, id)
			}
		}
		if err := insertContents(ctx, tx, envID, contents); err != nil {
			return err
		}
		if len(modified) > 0 {
			hashes := make([][]byte, 0, 2*len(modified))
			for _, m := range modified {
				hashes = append(hashes, m[0], m[1])
			}
			stored, err := loadContents(ctx, tx, envID, hashes)
			if err != nil {
				return err
			}
			for i, m := range modified {
				changes, err := diffContents(stored[string(m[0])], stored[string(m[1])])
				if err != nil {
					return fmt.Errorf("compare %s: %w", modifiedIDs[i], err)
				}
				out.Modified = append(out.Modified, intent.ModifiedResource{ID: modifiedIDs[i], Changes: changes})
			}
		}
		if len(rs) == 0 {
			return nil
		}
		run, err := insertRun(ctx, tx, e, out.BaseVersion, string(ledger.ActionDryrun), reason, nil)
		if err != nil {
			return err
		}
		for _, row := range overlay {
			row[1] = run.Run
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"dryrun_resources"},
			[]string{"environment_id", "run", "resource_id", "agent", "hash"}, pgx.CopyFromRows(overlay)); err != nil {
			return fmt.Errorf("store the dry-run's resources: %w", err)
		}
		ids := make([]string, 0, len(rs))
		for i := range rs {
			ids = append(ids, rs[i].ID.String())
		}
		if _, err := tx.Exec(ctx, `insert into deploy_requests (environment_id, kind, reason, resource_ids, run, requested_by)
			values ($1::uuid, 'dryrun', $2, $3, $4, $5)`, envID, reason, ids, run.Run, ActorOf(ctx)); err != nil {
			return err
		}
		out.Run = &run
		return nil
	})
	if err != nil {
		return InstanceDryrun{}, err
	}
	sort.Strings(out.Added)
	sort.Strings(out.Removed)
	sort.Strings(out.Unchanged)
	sort.Slice(out.Modified, func(a, b int) bool { return out.Modified[a].ID < out.Modified[b].ID })
	return out, nil
}

// hasDryrunResources reports whether a run's plan reads dryrun_resources
// (an instance's dry-run) rather than its version's membership.
func hasDryrunResources(ctx context.Context, tx pgx.Tx, envID string, run int64) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `select exists (select 1 from dryrun_resources where environment_id = $1::uuid and run = $2)`,
		envID, run).Scan(&ok)
	return ok, err
}
