package store

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AuditEntry is one row of the audit trail: who did what, from where,
// and how the server answered.
type AuditEntry struct {
	ID            int64           `json:"id"`
	At            time.Time       `json:"at"`
	EnvironmentID *string         `json:"environment_id"`
	Environment   string          `json:"environment,omitempty"`
	ActorKind     string          `json:"actor_kind"`
	Actor         string          `json:"actor"`
	RemoteAddr    string          `json:"remote_addr"`
	Action        string          `json:"action"`
	Method        string          `json:"method"`
	Path          string          `json:"path"`
	Status        int             `json:"status"`
	Detail        json.RawMessage `json:"detail,omitempty"`
}

// Audit appends e to the audit trail (its ID and At are the store's).
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	return auditInsert(ctx, s.pool, e)
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// auditInsert appends e through db: a write that records itself
// (CreateToken) passes its transaction, so the row and the write commit
// together.
func auditInsert(ctx context.Context, db execer, e AuditEntry) error {
	var detail any
	if len(e.Detail) > 0 {
		detail = e.Detail
	}
	_, err := db.Exec(ctx, `insert into audit_log
		(environment_id, environment, actor_kind, actor, remote_addr, action, method, path, status, detail)
		values ($1::uuid, nullif($2, ''), $3, $4, $5, $6, $7, $8, $9, $10)`,
		e.EnvironmentID, e.Environment, e.ActorKind, e.Actor, e.RemoteAddr, e.Action, e.Method, e.Path, e.Status, detail)
	return err
}

// Origin is where an API request came from, for the audit rows the
// store writes itself (CreateToken): the client's address, the method
// and the path. Writes made without a request have none.
type Origin struct {
	RemoteAddr, Method, Path string
}

type originKey struct{}

// WithOrigin returns ctx carrying o (the API sets it beside WithActor).
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginOf is the origin ctx carries; the zero Origin when none.
func OriginOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// AuditFilter selects audit rows. Zero fields select everything.
type AuditFilter struct {
	// EnvironmentID limits to one environment; "" with Global: only the
	// rows of no environment; "" without: every row.
	EnvironmentID string
	Global        bool
	Actor         string
	// Action matches exactly, or by prefix when it ends in '.'
	// ("version." matches version.export and version.release).
	Action string
	Since  time.Time
	Until  time.Time
	// Before is a cursor: only rows with a smaller id.
	Before int64
	Limit  int
}

// ListAudit returns audit rows, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	q := `select id, at, environment_id::text, coalesce(environment, ''), actor_kind, actor, remote_addr, action,
		method, path, status, detail from audit_log where true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	switch {
	case f.EnvironmentID != "":
		q += ` and environment_id = ` + arg(f.EnvironmentID) + `::uuid`
	case f.Global:
		q += ` and environment_id is null`
	}
	if f.Actor != "" {
		q += ` and actor = ` + arg(f.Actor)
	}
	if f.Action != "" {
		if f.Action[len(f.Action)-1] == '.' {
			q += ` and starts_with(action, ` + arg(f.Action) + `)`
		} else {
			q += ` and action = ` + arg(f.Action)
		}
	}
	if !f.Since.IsZero() {
		q += ` and at >= ` + arg(f.Since)
	}
	if !f.Until.IsZero() {
		q += ` and at < ` + arg(f.Until)
	}
	if f.Before > 0 {
		q += ` and id < ` + arg(f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` order by id desc limit ` + arg(limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		var detail []byte
		err := r.Scan(&e.ID, &e.At, &e.EnvironmentID, &e.Environment, &e.ActorKind, &e.Actor, &e.RemoteAddr,
			&e.Action, &e.Method, &e.Path, &e.Status, &detail)
		e.Detail = detail
		return e, err
	})
}
