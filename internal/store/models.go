package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// ModelSource describes a stored project archive (its bytes are read
// apart, by ModelArchive).
type ModelSource struct {
	Hash       string    `json:"hash"`
	Files      int       `json:"files"`
	Size       int       `json:"size"`
	Origin     string    `json:"origin"`
	UploadedAt time.Time `json:"uploaded_at"`
	// AnnouncedAt is when the source, as the newest released one, was
	// announced to the environment's live service instances; nil: not
	// yet (or not since it became the newest released again).
	AnnouncedAt *time.Time `json:"announced_at"`
	// ReleasedAt is when a version built from the source was last
	// released (nil: never). The newest released source is the one the
	// service instances compile with (ReleasedModelSource).
	ReleasedAt *time.Time `json:"-"`
	// Replaced (PutModel and PutModelSource only): it became the newest
	// model source in place of another one (or of none).
	Replaced bool `json:"-"`
}

// keepModelSources is how many model sources an environment keeps.
const keepModelSources = 5

// NewModel is a model as an upload or an autonomous compile stores it
// (PutModel): the project archive and the service entities compiled from
// it.
type NewModel struct {
	// Hash is the archive's SHA-256, hex.
	Hash    string
	Archive []byte
	Files   int
	// Origin is cli (intend export) or compile (autonomous).
	Origin   string
	Entities []lsm.Entity
	// Pools are the model's allocation pools (lsm_alloc.go), which
	// become the catalog's with the entities.
	Pools []lsm.Pool
	// Stage leaves the catalog as it is until a version built from the
	// source is released (releaseModel registers the entities then); the
	// entities are checked against the live instances all the same. An
	// environment that has released no source yet registers them at once.
	Stage bool
}

// PutModel makes m the environment's model: its service entities the
// catalog (as RegisterEntities, refused with a *BreakingChangesError when
// they would break live instances) and its archive the newest model
// source (as PutModelSource), in one transaction under the environment's
// lock. So the catalog is always the one of the newest source: a failure
// changes neither, and of concurrent uploads the last to commit is both
// the newest source and the catalog. An upload is not announced to the
// live instances: the source becomes their model when a version built
// from it is released (ReleaseVersion, Release.Model).
func (s *Store) PutModel(ctx context.Context, envID string, m NewModel) (ModelSource, error) {
	var src ModelSource
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		stage := m.Stage
		if stage {
			var released bool
			if err := tx.QueryRow(ctx, `select exists (select 1 from model_sources
				where environment_id = $1::uuid and released_at is not null)`, envID).Scan(&released); err != nil {
				return err
			}
			stage = released
		}
		var staged, stagedPools []byte
		if stage {
			live, err := liveInstances(ctx, tx, envID)
			if err != nil {
				return err
			}
			changes := breakingChanges(m.Entities, live)
			pools, err := poolChanges(ctx, tx, envID, m.Pools)
			if err != nil {
				return err
			}
			if changes = append(changes, pools...); len(changes) > 0 {
				return &BreakingChangesError{Changes: changes}
			}
			if staged, err = json.Marshal(m.Entities); err != nil {
				return err
			}
			if stagedPools, err = json.Marshal(m.Pools); err != nil {
				return err
			}
		} else if err := registerCatalog(ctx, tx, envID, m.Hash, m.Entities, m.Pools); err != nil {
			return err
		}
		var err error
		if src, err = putModelSource(ctx, tx, envID, m.Hash, m.Archive, m.Files, m.Origin); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `update model_sources set staged_entities = $3, staged_pools = $4
			where environment_id = $1::uuid and hash = $2`, envID, m.Hash, staged, stagedPools)
		return err
	})
	return src, err
}

// PutModelSource stores a project archive as the environment's newest
// model source. Storing one already stored (same hash) makes it the newest
// again and changes nothing else. Older ones beyond the few kept go.
// Replaced says whether the newest source changed. It leaves the catalog
// alone (uploads and compiles use PutModel) and the live instances too:
// a source is theirs once a version built from it is released.
func (s *Store) PutModelSource(ctx context.Context, envID, hash string, archive []byte, files int, origin string) (ModelSource, error) {
	var m ModelSource
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		var err error
		m, err = putModelSource(ctx, tx, envID, hash, archive, files, origin)
		return err
	})
	return m, err
}

// putModelSource is PutModelSource in tx, which holds the environment's
// lock.
func putModelSource(ctx context.Context, tx pgx.Tx, envID, hash string, archive []byte, files int, origin string) (ModelSource, error) {
	var m ModelSource
	var newest string
	var newestAt *time.Time
	err := tx.QueryRow(ctx, `select hash, uploaded_at from model_sources where environment_id = $1::uuid
		order by uploaded_at desc limit 1`, envID).Scan(&newest, &newestAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return m, err
	}
	m.Replaced = newest != hash
	// uploaded_at orders the sources as the lock orders their writes:
	// not now(), the transaction's start, which may come before that of
	// a write that committed while this one waited for the lock; the
	// clock now, and after the newest in any case (greatest ignores a
	// null).
	err = tx.QueryRow(ctx, `
		insert into model_sources (environment_id, hash, archive, files, size, origin, uploaded_at)
		values ($1::uuid, $2, $3, $4, $5, $6, greatest(clock_timestamp(), $7::timestamptz + interval '1 microsecond'))
		on conflict (environment_id, hash) do update set uploaded_at = excluded.uploaded_at, origin = excluded.origin
		returning `+modelSourceColumns,
		envID, hash, archive, files, len(archive), origin, newestAt).
		Scan(&m.Hash, &m.Files, &m.Size, &m.Origin, &m.UploadedAt, &m.AnnouncedAt, &m.ReleasedAt)
	if err != nil {
		return m, fmt.Errorf("store model source: %w", err)
	}
	// The newest released source stays whatever is uploaded after it:
	// it is the live instances' model until another one is released.
	_, err = tx.Exec(ctx, `delete from model_sources where environment_id = $1::uuid and hash not in (
		select hash from model_sources where environment_id = $1::uuid order by uploaded_at desc limit $2)
		and hash is distinct from (select hash from model_sources where environment_id = $1::uuid
			and released_at is not null order by released_at desc limit 1)`,
		envID, keepModelSources)
	return m, err
}

// LatestModelSource returns the environment's newest model source, or
// ErrNotFound when it has none.
func (s *Store) LatestModelSource(ctx context.Context, envID string) (ModelSource, error) {
	var m ModelSource
	err := s.pool.QueryRow(ctx, `select `+modelSourceColumns+` from model_sources
		where environment_id = $1::uuid order by uploaded_at desc limit 1`, envID).
		Scan(&m.Hash, &m.Files, &m.Size, &m.Origin, &m.UploadedAt, &m.AnnouncedAt, &m.ReleasedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, NotFound("the environment has no model source (intend export uploads one)")
	}
	return m, err
}

const modelSourceColumns = `hash, files, size, origin, uploaded_at, announced_at, released_at`

// ReleasedModelSource returns the model source the environment's service
// instances compile with: the newest one a released version was built
// from. An environment that never released such a version compiles them
// with its newest source (an upload before the first release: nothing is
// live yet that it could change). ErrNotFound: no source at all.
func (s *Store) ReleasedModelSource(ctx context.Context, envID string) (ModelSource, error) {
	var m ModelSource
	err := s.pool.QueryRow(ctx, `select `+modelSourceColumns+` from model_sources
		where environment_id = $1::uuid order by released_at desc nulls last, uploaded_at desc limit 1`, envID).
		Scan(&m.Hash, &m.Files, &m.Size, &m.Origin, &m.UploadedAt, &m.AnnouncedAt, &m.ReleasedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, NotFound("the environment has no model source (intend export uploads one)")
	}
	return m, err
}

// HasModelSource reports whether the environment stores the model source
// hash.
func (s *Store) HasModelSource(ctx context.Context, envID, hash string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `select exists (select 1 from model_sources where environment_id = $1::uuid and hash = $2)`,
		envID, hash).Scan(&ok)
	return ok, err
}

// releaseModel makes the model source version was built from (if it
// records one that is still stored) the newest released source, in tx,
// which releases version under the environment's lock. It returns the
// source's hash when the live instances have not been told of it yet
// (a source that becomes the newest released again is told again), ""
// otherwise.
func releaseModel(ctx context.Context, tx pgx.Tx, envID string, version int64) (string, error) {
	var hash *string
	if err := tx.QueryRow(ctx, `select model_hash from versions where environment_id = $1::uuid and version = $2`,
		envID, version).Scan(&hash); err != nil || hash == nil {
		return "", err
	}
	var current *string
	err := tx.QueryRow(ctx, `select hash from model_sources where environment_id = $1::uuid and released_at is not null
		order by released_at desc limit 1`, envID).Scan(&current)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	// A staged upload's entities become the catalog now (checked again:
	// instances may have changed since the upload).
	var staged, stagedPools []byte
	err = tx.QueryRow(ctx, `select staged_entities, staged_pools from model_sources where environment_id = $1::uuid and hash = $2`,
		envID, *hash).Scan(&staged, &stagedPools)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil // pruned: the instances keep the model they have
	}
	if err != nil {
		return "", err
	}
	if staged != nil {
		var entities []lsm.Entity
		if err := json.Unmarshal(staged, &entities); err != nil {
			return "", fmt.Errorf("staged service entities of model source %s: %w", *hash, err)
		}
		var pools []lsm.Pool
		if stagedPools != nil {
			if err := json.Unmarshal(stagedPools, &pools); err != nil {
				return "", fmt.Errorf("staged pools of model source %s: %w", *hash, err)
			}
		}
		if err := registerCatalog(ctx, tx, envID, *hash, entities, pools); err != nil {
			return "", err
		}
	}
	var announced *time.Time
	err = tx.QueryRow(ctx, `update model_sources set released_at = clock_timestamp(), staged_entities = null, staged_pools = null,
			announced_at = case when $3 then announced_at else null end
		where environment_id = $1::uuid and hash = $2 returning announced_at`,
		envID, *hash, current != nil && *current == *hash).Scan(&announced)
	if err != nil || announced != nil {
		return "", err
	}
	return *hash, nil
}

// ModelArchive returns the archive of one of the environment's model
// sources.
func (s *Store) ModelArchive(ctx context.Context, envID, hash string) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `select archive from model_sources where environment_id = $1::uuid and hash = $2`,
		envID, hash).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, NotFound("model source %s", hash)
	}
	return b, err
}

// MarkModelAnnounced records that the environment's model source hash was
// announced to its live service instances.
func (s *Store) MarkModelAnnounced(ctx context.Context, envID, hash string) error {
	_, err := s.pool.Exec(ctx, `update model_sources set announced_at = now()
		where environment_id = $1::uuid and hash = $2`, envID, hash)
	return err
}

// UnannouncedModelOf returns the environment's newest released model
// source if its live service instances were not told of it ("" when
// they were, or when none was released).
func (s *Store) UnannouncedModelOf(ctx context.Context, envID string) (string, error) {
	var hash string
	var announced *time.Time
	err := s.pool.QueryRow(ctx, `select hash, announced_at from model_sources
		where environment_id = $1::uuid and released_at is not null order by released_at desc limit 1`, envID).
		Scan(&hash, &announced)
	if errors.Is(err, pgx.ErrNoRows) || announced != nil {
		return "", nil
	}
	return hash, err
}

// UnannouncedModel is an environment whose newest released model source
// was not announced to its live service instances.
type UnannouncedModel struct {
	Environment Environment
	Hash        string
}

// UnannouncedModels lists the environments whose newest released model
// source was not announced, for the reconciler (a release announces its
// source after its commit; this finds one a crash left unannounced).
// Halted environments are left out: resuming announces.
func (s *Store) UnannouncedModels(ctx context.Context) ([]UnannouncedModel, error) {
	rows, err := s.pool.Query(ctx, `select environment_id, hash from (
			select distinct on (environment_id) environment_id, hash, announced_at
			from model_sources where released_at is not null order by environment_id, released_at desc) newest
		where announced_at is null
		  and not exists (select 1 from environments e where e.id = newest.environment_id and e.halted)`)
	if err != nil {
		return nil, err
	}
	type pair struct{ env, hash string }
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pair, error) {
		var p pair
		return p, r.Scan(&p.env, &p.hash)
	})
	if err != nil {
		return nil, err
	}
	var out []UnannouncedModel
	for _, p := range ps {
		e, err := s.GetEnvironment(ctx, p.env)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, UnannouncedModel{Environment: e, Hash: p.hash})
	}
	return out, nil
}
