package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PruneVersions deletes the oldest versions of an environment so that at
// most keep remain, and returns how many it deleted. keep <= 0 deletes
// nothing. It never deletes the released version or a newer one, nor the
// version of a pending or running deploy run or dry-run (which may still
// read it), so more than keep versions can remain.
//
// With the versions go the membership rows that no remaining version needs
// and the contents that nothing references any more: no membership row,
// no resource_state intent or deployed hash, no deploy batch. The deploy
// state, deploy runs and the action log are not touched; they keep naming
// the deleted versions by number.
//
// It runs in one transaction holding the environment row lock, which
// serialises it with exports and releases (the only writers of membership
// rows, contents and intent hashes); every step is one set-based statement.
func (s *Store) PruneVersions(ctx context.Context, envID string, keep int) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	var deleted int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var released *int64
		if err := tx.QueryRow(ctx, `select released_version from environments where id = $1::uuid for update`, envID).
			Scan(&released); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return NotFound("environment %q", envID)
			}
			return err
		}

		// cutoff is the oldest version that stays: the keep-th newest,
		// or older to spare the released version and those of open runs.
		var cutoff int64
		err := tx.QueryRow(ctx, `select version from versions where environment_id = $1::uuid
			order by version desc offset $2 limit 1`, envID, keep-1).Scan(&cutoff)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // keep versions or fewer
		}
		if err != nil {
			return err
		}
		if released != nil {
			cutoff = min(cutoff, *released)
		}
		var open *int64
		if err := tx.QueryRow(ctx, `select min(version) from deploy_runs
			where environment_id = $1::uuid and status in ('pending', 'running')`, envID).Scan(&open); err != nil {
			return fmt.Errorf("find open runs: %w", err)
		}
		if open != nil {
			cutoff = min(cutoff, *open)
		}

		tag, err := tx.Exec(ctx, `delete from versions where environment_id = $1::uuid and version < $2`, envID, cutoff)
		if err != nil {
			return fmt.Errorf("delete versions: %w", err)
		}
		deleted = int(tag.RowsAffected())
		if deleted == 0 {
			return nil
		}

		// Versions are exported as last_version + 1 and only ever pruned
		// from the oldest end, so the remaining ones are every version
		// from cutoff to the newest. A row [first, last) holds one of them
		// iff it is open or last > cutoff; the rest go. (Were there ever a
		// gap, this would still never delete a needed row, only keep some
		// that are not.) Open rows are never deleted.
		if _, err := tx.Exec(ctx, `delete from version_resources
			where environment_id = $1::uuid and last_version is not null and last_version <= $2`,
			envID, cutoff); err != nil {
			return fmt.Errorf("delete memberships: %w", err)
		}

		// An instance dry-run's resources are its plan's business until
		// the run ends; its batches keep their contents after that.
		if _, err := tx.Exec(ctx, `delete from dryrun_resources o
			where o.environment_id = $1::uuid and not exists (select 1 from deploy_runs r
			      where r.environment_id = o.environment_id and r.run = o.run and r.status in ('pending', 'running'))`,
			envID); err != nil {
			return fmt.Errorf("delete finished dry-runs' resources: %w", err)
		}

		// A sweep of all the environment's contents rather than only those
		// of the rows just deleted: contents kept earlier for a deployed
		// hash or a batch that has since moved on go too. Each test is an
		// anti-join (one pass over each table), not a lookup per row.
		if _, err := tx.Exec(ctx, `
			delete from resource_contents c
			where c.environment_id = $1::uuid
			  and not exists (select 1 from version_resources vr
			      where vr.environment_id = c.environment_id and vr.hash = c.hash)
			  and not exists (select 1 from resource_state rs
			      where rs.environment_id = c.environment_id and rs.intent_hash = c.hash)
			  and not exists (select 1 from resource_state rs
			      where rs.environment_id = c.environment_id and rs.deployed_hash = c.hash)
			  and not exists (select 1 from deploy_batches b cross join lateral unnest(b.hashes) as u(hash)
			      where b.environment_id = c.environment_id and u.hash = c.hash)
			  and not exists (select 1 from dryrun_resources o
			      where o.environment_id = c.environment_id and o.hash = c.hash)`, envID); err != nil {
			return fmt.Errorf("delete contents: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
