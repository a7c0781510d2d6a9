// Package store is intend's PostgreSQL layer: every query the server and the
// executors run lives here, written against pgx v5. Callers get plain Go
// values and typed errors (*NotFoundError, *ConflictError, which are
// ErrNotFound and ErrConflict to errors.Is), never pgx types.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is wrapped by errors about rows that do not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is wrapped by errors about requests that contradict what is
// stored (a duplicate name, a stale version).
var ErrConflict = errors.New("conflict")

// ErrBusy is wrapped by errors about work refused because as much of it
// runs already as is allowed (retry later).
var ErrBusy = errors.New("busy")

// Store wraps a pgx connection pool. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// live keeps the live service instances as LiveServiceInstances
	// decoded them last, so that the next read decodes only the changed.
	live liveCache
	// batches keeps the ids and hashes of batches for BatchHead.
	batches batchHashes
	// heads keeps the heads of batches for IntentHead.
	heads batchHeads
	// perResource records every attempt in a row of its own, unchanged
	// ones too (as before migration 031): for tests that compare.
	perResource bool
}

// Open connects to databaseURL and checks the connection.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	return OpenConfig(ctx, cfg)
}

// OpenConfig is Open with a parsed pool configuration (tests set a
// tracer on it to count the statements of a path).
func OpenConfig(ctx context.Context, cfg *pgxpool.Config) (*Store, error) {
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close releases the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	return s.pool.QueryRow(ctx, "select 1").Scan(&one)
}

func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return constraint == "" || pe.ConstraintName == constraint
	}
	return false
}

// IsInvalidText reports whether err, from any method of Store, is
// PostgreSQL refusing text it was sent: a NUL character, which text and
// jsonb cannot hold, or invalid UTF-8 (SQLSTATE 22021
// character_not_in_repertoire, and 22P05 untranslatable_character for
// "\u0000" in jsonb). Such text can only come from the client, so callers
// answer it as a bad request rather than a failure. It is a predicate
// rather than a sentinel because every method wraps the pgx error in its
// own context; matching it once here keeps pgx types out of the callers.
func IsInvalidText(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05")
}

func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}
