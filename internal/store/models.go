package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ModelSource describes a stored project archive (its bytes are read
// apart, by ModelArchive).
type ModelSource struct {
	Hash       string    `json:"hash"`
	Files      int       `json:"files"`
	Size       int       `json:"size"`
	Origin     string    `json:"origin"`
	UploadedAt time.Time `json:"uploaded_at"`
	// Replaced (PutModelSource only): it became the newest model source
	// in place of another one (or of none).
	Replaced bool `json:"-"`
}

// keepModelSources is how many model sources an environment keeps.
const keepModelSources = 5

// PutModelSource stores a project archive as the environment's newest
// model source. Storing one already stored (same hash) makes it the newest
// again and changes nothing else. Older ones beyond the few kept go.
// Replaced says whether the newest source changed.
func (s *Store) PutModelSource(ctx context.Context, envID, hash string, archive []byte, files int, origin string) (ModelSource, error) {
	var m ModelSource
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		var newest string
		err := tx.QueryRow(ctx, `select hash from model_sources where environment_id = $1::uuid
			order by uploaded_at desc limit 1`, envID).Scan(&newest)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		m.Replaced = newest != hash
		err = tx.QueryRow(ctx, `
			insert into model_sources (environment_id, hash, archive, files, size, origin)
			values ($1::uuid, $2, $3, $4, $5, $6)
			on conflict (environment_id, hash) do update set uploaded_at = now(), origin = excluded.origin
			returning hash, files, size, origin, uploaded_at`,
			envID, hash, archive, files, len(archive), origin).Scan(&m.Hash, &m.Files, &m.Size, &m.Origin, &m.UploadedAt)
		if err != nil {
			return fmt.Errorf("store model source: %w", err)
		}
		_, err = tx.Exec(ctx, `delete from model_sources where environment_id = $1::uuid and hash not in (
			select hash from model_sources where environment_id = $1::uuid order by uploaded_at desc limit $2)`,
			envID, keepModelSources)
		return err
	})
	return m, err
}

// LatestModelSource returns the environment's newest model source, or
// ErrNotFound when it has none.
func (s *Store) LatestModelSource(ctx context.Context, envID string) (ModelSource, error) {
	var m ModelSource
	err := s.pool.QueryRow(ctx, `select hash, files, size, origin, uploaded_at from model_sources
		where environment_id = $1::uuid order by uploaded_at desc limit 1`, envID).
		Scan(&m.Hash, &m.Files, &m.Size, &m.Origin, &m.UploadedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, fmt.Errorf("the environment has no model source (intend export uploads one): %w", ErrNotFound)
	}
	return m, err
}

// ModelArchive returns the archive of one of the environment's model
// sources.
func (s *Store) ModelArchive(ctx context.Context, envID, hash string) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `select archive from model_sources where environment_id = $1::uuid and hash = $2`,
		envID, hash).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("model source %s: %w", hash, ErrNotFound)
	}
	return b, err
}
