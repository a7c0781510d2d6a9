// Package migrations holds intend's PostgreSQL schema as numbered SQL files
// (tern format: "---- create above / drop below ----" splits up and down),
// embedded into the binary and applied by `intend server` and `intend migrate`.
package migrations

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable is the table tern keeps the schema version in.
const VersionTable = "intend_schema_version"

// Apply migrates the database at databaseURL to target; target < 0 means the
// newest version this binary knows. Concurrent callers are serialised by
// tern's advisory lock, so several servers may start at once.
//
// With target < 0, a database newer than this binary is left as it is
// (from == to, above Latest): during a rolling upgrade the previous
// release's replicas run on the new schema, and one that restarts must
// not undo the migration the new replicas rely on. Every migration keeps
// the previous release working (docs/operations.md, "Upgrades"); going
// down takes an explicit target (`intend migrate --to N`).
func Apply(ctx context.Context, databaseURL string, target int32) (from, to int32, err error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return 0, 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return 0, 0, fmt.Errorf("migrator: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return 0, 0, fmt.Errorf("load migrations: %w", err)
	}
	from, err = m.GetCurrentVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("current version: %w", err)
	}
	if target < 0 {
		target = int32(len(m.Migrations))
		if from > target {
			return from, from, nil
		}
	}
	if target > int32(len(m.Migrations)) {
		return from, from, fmt.Errorf("target version %d does not exist (newest is %d)", target, len(m.Migrations))
	}
	if err := m.MigrateTo(ctx, target); err != nil {
		return from, 0, fmt.Errorf("migrate %d → %d: %w", from, target, err)
	}
	return from, target, nil
}

// Latest returns the number of the newest migration.
func Latest() (int32, error) {
	names, err := migrate.FindMigrations(files)
	if err != nil {
		return 0, err
	}
	return int32(len(names)), nil
}
