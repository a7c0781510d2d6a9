package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// pgStatements is -pgstatements: with N > 0, PostgreSQL loads
// pg_stat_statements, and after P1–P5 the bench prints the N statements of
// the intend database that took the most time (planning and execution).
var pgStatements int

// pgSettings is -pgset: more PostgreSQL settings, name=value each.
type pgSettings []string

func (s *pgSettings) String() string { return strings.Join(*s, " ") }

func (s *pgSettings) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want name=value", v)
	}
	*s = append(*s, v)
	return nil
}

var pgSet pgSettings

// pgStatSettings are the server settings of -pgset and those
// -pgstatements needs.
func pgStatSettings() []string {
	out := append([]string(nil), pgSet...)
	if pgStatements > 0 {
		out = append(out, "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on",
			"pg_stat_statements.max=2000")
	}
	return out
}

// pgStatReset creates the extension (once) and forgets what was counted so
// far, so the report covers what follows.
func pgStatReset(ctx context.Context, url string) error {
	if pgStatements <= 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `create extension if not exists pg_stat_statements`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `select pg_stat_statements_reset(), pg_stat_reset_shared('wal')`)
	return err
}

// pgStatReport prints the statements of the intend database that took the
// most time since pgStatReset, and their totals.
func pgStatReport(ctx context.Context, url string, out io.Writer) error {
	if pgStatements <= 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	const where = `from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = current_database()`
	var calls, rows int64
	var plan, exec float64
	if err := conn.QueryRow(ctx, `select coalesce(sum(calls), 0)::bigint, coalesce(sum(rows), 0)::bigint,
		coalesce(sum(total_plan_time), 0), coalesce(sum(total_exec_time), 0) `+where).Scan(&calls, &rows, &plan, &exec); err != nil {
		return err
	}
	var walRecords, walFPI, walBytes int64
	if err := conn.QueryRow(ctx, `select wal_records, wal_fpi, wal_bytes::bigint from pg_stat_wal`).Scan(&walRecords, &walFPI, &walBytes); err != nil {
		return err
	}
	fmt.Fprintf(out, "pg_stat_statements: %d calls, %d rows, planning %.0f ms, execution %.0f ms; WAL %d records, %d full pages, %d kB\n",
		calls, rows, plan, exec, walRecords, walFPI, walBytes>>10)
	rs, err := conn.Query(ctx, `select calls, rows, plans, total_plan_time, total_exec_time, shared_blks_hit + shared_blks_read,
		query `+where+` order by total_plan_time + total_exec_time desc limit $1`, pgStatements)
	if err != nil {
		return err
	}
	defer rs.Close()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "calls\trows\tplans\tplan ms\texec ms\tblocks\t query\n")
	for rs.Next() {
		var calls, rows, plans, blocks int64
		var plan, exec float64
		var q string
		if err := rs.Scan(&calls, &rows, &plans, &plan, &exec, &blocks, &q); err != nil {
			return err
		}
		q = strings.Join(strings.Fields(q), " ")
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f\t%.0f\t%d\t %s\n", calls, rows, plans, plan, exec, blocks, q)
	}
	if err := rs.Err(); err != nil {
		return err
	}
	return tw.Flush()
}
