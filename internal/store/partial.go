package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/intent"
)

// ExportPartial stores, as the environment's next version, the newest
// version with a partial export merged in, and returns it: the sets that
// partial has resources of are replaced wholly by them, the sets named in
// removedSets go, shared resources of partial are added (or must equal the
// stored ones) and everything else is kept. intent.MergePartial states the
// rules. The newest version is read and the new one written in one
// transaction holding the environment row lock, so partial and full
// exports of one environment never interleave; an environment without
// versions merges into the empty version.
//
// A refused export returns a *intent.ValidationError whose paths point
// into the partial export (by index in partial.Resources as given, which
// for intent.DecodePartial's result is the body's order), and stores
// nothing.
func (s *Store) ExportPartial(ctx context.Context, envID string, partial intent.Version, removedSets []string) (VersionInfo, error) {
	return s.exportPartial(ctx, envID, partial, removedSets, false)
}

// ExportInstanceSets is ExportPartial for the lifecycle engine: the
// partial export builds on the released version (the newest when none is
// released), never on a newer one a developer exported and did not
// release, which would then go out with the instance's change.
func (s *Store) ExportInstanceSets(ctx context.Context, envID string, partial intent.Version, removedSets []string) (VersionInfo, error) {
	return s.exportPartial(ctx, envID, partial, removedSets, true)
}

func (s *Store) exportPartial(ctx context.Context, envID string, partial intent.Version, removedSets []string, onReleased bool) (VersionInfo, error) {
	var info VersionInfo
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		last, err := lockForExport(ctx, tx, envID)
		if err != nil {
			return err
		}
		base, open, err := openResources(ctx, tx, envID)
		if err != nil {
			return err
		}
		if onReleased {
			released, err := releasedVersion(ctx, tx, envID)
			if err != nil {
				return err
			}
			if released > 0 && released < last {
				if base, err = versionMembers(ctx, tx, envID, released); err != nil {
					return err
				}
			}
		}
		m, err := intent.MergePartial(base, partial, removedSets)
		if err != nil {
			return fmt.Errorf("merge partial export: %w", err)
		}
		members := make([]member, 0, len(m.Resources)+len(m.Kept))
		for i := range m.Resources {
			r := &m.Resources[i]
			members = append(members, member{id: r.ID.String(), hash: r.Hash(), r: r})
		}
		for i := range m.Kept {
			members = append(members, keptMember(&m.Kept[i]))
		}
		info, err = writeVersion(ctx, tx, envID, last+1, open, members)
		return err
	})
	return info, err
}

// selectStored reads membership rows as scanStored takes them; the caller
// adds which rows.
const selectStored = `select vr.resource_id, vr.hash, coalesce(vr.resource_set, ''), c.requires
	from version_resources vr
	join resource_contents c on c.environment_id = vr.environment_id and c.hash = vr.hash
	where vr.environment_id = $1::uuid and `

// releasedVersion is the environment's released version (0: none). The
// caller holds its row lock.
func releasedVersion(ctx context.Context, tx pgx.Tx, envID string) (int64, error) {
	var released *int64
	if err := tx.QueryRow(ctx, `select released_version from environments where id = $1::uuid`, envID).Scan(&released); err != nil {
		return 0, err
	}
	if released == nil {
		return 0, nil
	}
	return *released, nil
}

// versionMembers reads version v's resources as openResources reads the
// newest's.
func versionMembers(ctx context.Context, tx pgx.Tx, envID string, v int64) ([]intent.StoredResource, error) {
	rows, err := tx.Query(ctx, selectStored+`vr.first_version <= $2 and (vr.last_version is null or vr.last_version > $2)`,
		envID, v)
	if err != nil {
		return nil, err
	}
	base, _, err := scanStored(rows)
	return base, err
}

// openResources reads the newest version from its open membership rows:
// what intent.MergePartial needs of each resource, and the rows' hashes by
// resource id for writeVersion. Attributes are not read: kept resources
// keep their stored content.
func openResources(ctx context.Context, tx pgx.Tx, envID string) ([]intent.StoredResource, map[string][]byte, error) {
	rows, err := tx.Query(ctx, selectStored+`vr.last_version is null`, envID)
	if err != nil {
		return nil, nil, err
	}
	return scanStored(rows)
}

// scanStored reads rows of (resource_id, hash, resource_set, requires).
func scanStored(rows pgx.Rows) ([]intent.StoredResource, map[string][]byte, error) {
	defer rows.Close()
	var base []intent.StoredResource
	open := map[string][]byte{}
	for rows.Next() {
		var id string
		var h []byte
		var requires []string
		var r intent.StoredResource
		if err := rows.Scan(&id, &h, &r.ResourceSet, &requires); err != nil {
			return nil, nil, err
		}
		var err error
		if r.ID, err = resource.Parse(id); err != nil {
			return nil, nil, fmt.Errorf("stored resource %q: %w", id, err)
		}
		if len(h) != len(r.Hash) {
			return nil, nil, fmt.Errorf("stored resource %q: hash of %d bytes", id, len(h))
		}
		copy(r.Hash[:], h)
		r.Requires = make([]resource.ID, len(requires))
		for i, q := range requires {
			if r.Requires[i], err = resource.Parse(q); err != nil {
				return nil, nil, fmt.Errorf("stored resource %q: require %q: %w", id, q, err)
			}
		}
		base = append(base, r)
		open[id] = h
	}
	return base, open, rows.Err()
}
