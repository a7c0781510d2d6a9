package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// environmentRowTables are the per-resource tables whose environment_id
// is checked once per statement instead of by a foreign key (migration
// 032; docs/architecture.md, "Environment rows without foreign keys").
var environmentRowTables = []string{"resource_actions", "unchanged_actions", "facts", "resource_state",
	"version_resources", "resource_contents"}

// TestEnvironmentRowsKeepTheirEnvironment checks that the per-resource
// tables keep the guarantees of the foreign keys they no longer have: a
// row of an environment that does not exist is refused with a foreign
// key violation (COPY included), a transaction that wrote rows of an
// environment keeps it from being deleted until it ends, environment_id
// does not change, and deleting an environment (a bare delete, not
// DeleteEnvironment's clear) deletes the rows of each table.
func TestEnvironmentRowsKeepTheirEnvironment(t *testing.T) {
	t.Parallel()
	st, url, conn := open(t)
	ctx := context.Background()
	e := newEnv(t, st)
	other, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	// Rows in every table of both environments: a version, the
	// records (changed, unchanged) and facts.
	for _, env := range []store.Environment{e, other} {
		info, err := st.ExportVersion(ctx, env.ID, files(t, 3, map[int]string{0: "y"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReleaseVersion(ctx, env.ID, info.Version); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		var recs []store.ActionRecord
		for i, id := range []string{"fs::File[h,path=/f0]", "fs::File[h,path=/f1]", "fs::File[h,path=/f2]"} {
			op := "none"
			if i == 0 {
				op = "create"
			}
			recs = append(recs, store.ActionRecord{ResourceID: id, Hash: []byte("h"), Version: info.Version,
				Action: ledger.ActionDeploy, Reason: "test", StartedAt: now, FinishedAt: now, Result: "deployed",
				Operation: op, Changed: i == 0, Facts: map[string]json.RawMessage{"size": json.RawMessage(`1`)},
				WorkflowID: "wf-" + env.Name, RunID: "r", Attempt: 1})
		}
		if err := st.RecordActions(ctx, env.ID, recs); err != nil {
			t.Fatal(err)
		}
	}
	count := func(table, envID string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `select count(*) from `+table+` where environment_id = $1::uuid`, envID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, table := range environmentRowTables {
		if count(table, e.ID) == 0 {
			t.Fatalf("no rows of %s in the environment: the test writes none", table)
		}
	}

	// No foreign key checks each row (issue 28: 67,000 checks over
	// intend-bench's P1–P5 at 10,000).
	var fks []string
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `select conname from pg_constraint
			where contype = 'f' and confrelid = 'environments'::regclass and conrelid::regclass::text = any($1)`,
			environmentRowTables)
		if err != nil {
			return err
		}
		fks, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(fks) > 0 {
		t.Errorf("foreign keys checked per row: %v", fks)
	}

	isFK := func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23503"
	}
	const gone = "00000000-0000-0000-0000-00000000dead"
	if _, err := conn.Exec(ctx, `insert into facts (environment_id, resource_id, name, value)
		values ($1::uuid, 'r', 'n', '1'), ($2::uuid, 'r', 'n', '1')`, e.ID, gone); !isFK(err) {
		t.Errorf("a fact of no environment (with one of e): %v, want a foreign key violation", err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"resource_actions"},
		[]string{"environment_id", "resource_id", "version", "action", "reason", "started_at", "finished_at", "result",
			"workflow_id", "run_id", "attempt"},
		pgx.CopyFromRows([][]any{{gone, "r", 1, "deploy", "x", time.Now(), time.Now(), "deployed", "w", "r", 1}})); !isFK(err) {
		t.Errorf("a COPY of an action of no environment: %v, want a foreign key violation", err)
	}
	if _, err := conn.Exec(ctx, `update resource_state set environment_id = $2::uuid, resource_id = resource_id || '-moved'
		where environment_id = $1::uuid`,
		e.ID, other.ID); !isFK(err) {
		t.Errorf("moving resource_state rows to another environment: %v, want refused", err)
	}

	// A transaction that wrote a row of e holds e: its delete waits.
	conn2, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	tx, err := conn2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `insert into facts (environment_id, resource_id, name, value)
		values ($1::uuid, 'late', 'n', '1')`, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `set lock_timeout = '300ms'`); err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	if _, err := conn.Exec(ctx, `delete from environments where id = $1::uuid`, e.ID); !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Errorf("deleting the environment while a transaction wrote a row of it: %v, want a lock timeout", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `set lock_timeout = 0`); err != nil {
		t.Fatal(err)
	}

	// A bare delete of the environment deletes its rows, not the other's.
	if _, err := conn.Exec(ctx, `delete from environments where id = $1::uuid`, e.ID); err != nil {
		t.Fatal(err)
	}
	for _, table := range environmentRowTables {
		if n := count(table, e.ID); n != 0 {
			t.Errorf("%d rows of %s left of the deleted environment", n, table)
		}
		if count(table, other.ID) == 0 {
			t.Errorf("the rows of %s of the other environment went too", table)
		}
	}
}
