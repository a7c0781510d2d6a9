package store

import (
	"context"
	"errors"
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
	return s.ExportPartialOf(ctx, envID, partial, removedSets, "")
}

// ExportPartialOf is ExportPartial of sets compiled from the model source
// model ("": none known), which the version records (ExportVersionOf).
func (s *Store) ExportPartialOf(ctx context.Context, envID string, partial intent.Version, removedSets []string, model string) (VersionInfo, error) {
	var info VersionInfo
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if info, err = exportPartialTx(ctx, tx, envID, partial, removedSets, false); err != nil {
			return err
		}
		return setVersionModel(ctx, tx, envID, info.Version, model)
	})
	return info, err
}

// ExportInstanceSets is ExportPartial for the lifecycle engine, and
// releases what it exports, in one transaction. The partial export builds
// on the released version (the newest when none is released), never on a
// newer one a developer exported and did not release, which would then go
// out with the instance's change. Export and release are one step under
// the environment's row lock, so no version of instance sets is ever left
// unreleased: were they two, another server replica's export in between
// would build on the released version without this one's sets, release
// after it, and the sets would be lost (the end-to-end test on two
// replicas found 23 of 100 instances up without their resources).
func (s *Store) ExportInstanceSets(ctx context.Context, envID string, partial intent.Version, removedSets []string) (Release, error) {
	var rel Release
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		info, err := exportPartialTx(ctx, tx, envID, partial, removedSets, true)
		if err != nil {
			return err
		}
		rel, err = releaseVersion(ctx, tx, envID, info.Version)
		return err
	})
	return rel, err
}

// exportPartialTx is ExportPartial in tx (onReleased: on the released
// version, as ExportInstanceSets).
func exportPartialTx(ctx context.Context, tx pgx.Tx, envID string, partial intent.Version, removedSets []string, onReleased bool) (VersionInfo, error) {
	last, err := lockForExport(ctx, tx, envID)
	if err != nil {
		return VersionInfo{}, err
	}
	var released int64
	if onReleased {
		if released, err = releasedVersion(ctx, tx, envID); err != nil {
			return VersionInfo{}, err
		}
	}
	var base []intent.StoredResource
	var open map[string][]byte
	prev := 0
	if released > 0 && released < last {
		// On an older version than the newest: the new version is the
		// released one merged with partial, which differs from the
		// newest anywhere the unreleased versions changed it.
		if _, open, err = openResources(ctx, tx, envID); err != nil {
			return VersionInfo{}, err
		}
		if base, err = versionMembers(ctx, tx, envID, released); err != nil {
			return VersionInfo{}, err
		}
		prev = len(open)
	} else {
		if base, open, err = touchedResources(ctx, tx, envID, partial, removedSets); err != nil {
			return VersionInfo{}, err
		}
		if prev, err = resourceCount(ctx, tx, envID, last); err != nil {
			return VersionInfo{}, err
		}
	}
	m, err := intent.MergePartial(base, partial, removedSets)
	if err != nil {
		return VersionInfo{}, fmt.Errorf("merge partial export: %w", err)
	}
	members := make([]member, 0, len(m.Resources)+len(m.Kept))
	for i := range m.Resources {
		r := &m.Resources[i]
		members = append(members, member{id: r.ID.String(), hash: r.Hash(), r: r})
	}
	for i := range m.Kept {
		members = append(members, keptMember(&m.Kept[i]))
	}
	info, err := writeVersion(ctx, tx, envID, last+1, prev, open, members)
	if err != nil {
		return info, err
	}
	// The plugins the partial export names, or else its base's.
	if partial.Plugins != nil {
		err = setVersionPlugins(ctx, tx, envID, info.Version, partial.Plugins)
	} else if released > 0 && released < last {
		err = copyVersionPlugins(ctx, tx, envID, info.Version, released)
	} else {
		err = copyVersionPlugins(ctx, tx, envID, info.Version, last)
	}
	return info, err
}

// touchedResources reads the part of the newest version that merging
// partial (which removes removedSets) into it can change or must check:
// the resources of the sets it updates or removes, those with the ids it
// carries and those its resources require; with their open rows' hashes
// for writeVersion. Nothing else can change: a set's resources may
// require only their own set and shared resources, shared ones only
// shared ones, and a partial export changes no shared resource, so no
// resource outside this part requires one that goes, and no requires
// cycle runs through it. That is also why the requires of these
// resources are not read: MergePartial keeps those outside the sets as
// they are and checks partial's requires against their ids and sets
// only. A partial export costs what it touches, not what the version
// holds (thousands of service instances each export their own set).
func touchedResources(ctx context.Context, tx pgx.Tx, envID string, partial intent.Version, removedSets []string) ([]intent.StoredResource, map[string][]byte, error) {
	var sets []string
	seen := map[string]bool{}
	addSet := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			sets = append(sets, s)
		}
	}
	ids := make([]string, 0, 2*len(partial.Resources))
	for i := range partial.Resources {
		r := &partial.Resources[i]
		addSet(r.ResourceSet)
		ids = append(ids, r.ID.String())
		for _, q := range r.Requires {
			ids = append(ids, q.String())
		}
	}
	for _, s := range removedSets {
		addSet(s)
	}
	rows, err := tx.Query(ctx, `select vr.resource_id, vr.hash, coalesce(vr.resource_set, ''), '{}'::text[]
		from version_resources vr
		where vr.environment_id = $1::uuid and vr.last_version is null
		  and (vr.resource_set = any($2) or vr.resource_id = any($3))`, envID, sets, ids)
	if err != nil {
		return nil, nil, err
	}
	return scanStored(rows)
}

// resourceCount is how many resources version v holds (0 for version 0).
func resourceCount(ctx context.Context, tx pgx.Tx, envID string, v int64) (int, error) {
	if v == 0 {
		return 0, nil
	}
	// The newest version up to v: when v itself was deleted (a deleted
	// newest version, a cleared environment), the open rows are the
	// newest remaining one's (DeleteVersion), or none.
	var n int
	err := tx.QueryRow(ctx, `select resource_count from versions where environment_id = $1::uuid and version <= $2
		order by version desc limit 1`, envID, v).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
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
