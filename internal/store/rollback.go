package store

import (
	"context"
	"errors"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
)

// Rollback is what RollbackVersion made: the new version, equal to From
// outside the service instances' sets, and its release.
type Rollback struct {
	Release
	// From is the version rolled back to.
	From int64 `json:"rolled_back_from"`
	// KeptInstanceResources counts the resources of service instances'
	// sets taken from the newest version rather than from From.
	KeptInstanceResources int `json:"kept_instance_resources"`
}

// instanceSet matches the name of a service instance's resource set,
// "<entity>/<instance uuid>".
var instanceSet = regexp.MustCompile(`^([^/]+)/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// RollbackVersion makes a new version equal to version from and releases
// it, in one transaction under the environment's row lock: desired state
// goes back without a re-export, and releasing an older version (which
// ReleaseVersion refuses) is never needed.
//
// The resource sets of service instances are the lifecycle engine's, not
// the author's: they are taken as the newest version has them, never from
// from (an instance created since keeps its resources, one deleted since
// does not get them back, an update since is not undone behind the
// instance's back). A set is an instance's when its name is
// "<entity>/<uuid>" and the entity is in the catalog. If a kept
// instance's resource requires a resource that version from lacks, the
// rollback is refused (a *ConflictError) and nothing is written.
func (s *Store) RollbackVersion(ctx context.Context, envID string, from int64) (Rollback, error) {
	var out Rollback
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = rollbackVersion(ctx, tx, envID, from)
		return err
	})
	return out, err
}

func rollbackVersion(ctx context.Context, tx pgx.Tx, envID string, from int64) (Rollback, error) {
	last, err := lockForExport(ctx, tx, envID)
	if err != nil {
		return Rollback{}, err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `select exists (select 1 from versions where environment_id = $1::uuid and version = $2)`,
		envID, from).Scan(&exists); err != nil {
		return Rollback{}, err
	}
	if !exists {
		return Rollback{}, NotFound("version %d", from)
	}
	entities, err := entityNames(ctx, tx, envID)
	if err != nil {
		return Rollback{}, err
	}
	isInstanceSet := func(set string) bool {
		m := instanceSet.FindStringSubmatch(set)
		return m != nil && entities[m[1]]
	}
	then, err := versionMembers(ctx, tx, envID, from)
	if err != nil {
		return Rollback{}, err
	}
	newest, open, err := openResources(ctx, tx, envID)
	if err != nil {
		return Rollback{}, err
	}
	members := make([]member, 0, len(then))
	ids := make(map[string]bool, len(then))
	var kept []*intent.StoredResource
	for i := range then {
		if isInstanceSet(then[i].ResourceSet) {
			continue
		}
		members = append(members, keptMember(&then[i]))
		ids[then[i].ID.String()] = true
	}
	for i := range newest {
		if isInstanceSet(newest[i].ResourceSet) {
			members = append(members, keptMember(&newest[i]))
			ids[newest[i].ID.String()] = true
			kept = append(kept, &newest[i])
		}
	}
	for _, r := range kept {
		for _, q := range r.Requires {
			if !ids[q.String()] {
				return Rollback{}, Conflict("version %d has no %s, which %s of the instance set %s requires",
					from, q, r.ID, r.ResourceSet)
			}
		}
	}
	info, err := writeVersion(ctx, tx, envID, last+1, len(open), open, members)
	if err != nil {
		return Rollback{}, err
	}
	if err := copyVersionPlugins(ctx, tx, envID, info.Version, from); err != nil {
		return Rollback{}, err
	}
	rel, err := releaseVersion(ctx, tx, envID, info.Version)
	if err != nil {
		return Rollback{}, err
	}
	return Rollback{Release: rel, From: from, KeptInstanceResources: len(kept)}, nil
}

// entityNames is the set of the environment's service entity names.
func entityNames(ctx context.Context, tx pgx.Tx, envID string) (map[string]bool, error) {
	rows, err := tx.Query(ctx, `select name from service_entities where environment_id = $1::uuid`, envID)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m, nil
}
