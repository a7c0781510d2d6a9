package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultRefusalWindow is how often one caller's refusals of one kind
// (action, status, environment) get an audit row of their own.
const DefaultRefusalWindow = time.Minute

// refusalSummary is the audit row that sums up a window's counted
// refusals: as the last of them, with the count and the times in its
// detail ("41 more refusals of token.create by token:reader between T1
// and T2"). Selected from audit_refusal_windows w.
const refusalSummary = `select w.last_at, w.environment_id, w.environment, w.actor_kind, w.actor, w.remote_addr,
		w.action, w.method, w.path, w.status,
		jsonb_build_object(
			'summary', format('%s more refusals of %s by %s between %s and %s', w.suppressed, w.action, w.actor,
				to_char(w.first_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
				to_char(w.last_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
			'refusals', w.suppressed, 'first', w.first_at, 'last', w.last_at)`

// countRefusal counts a refusal in its window.
const countRefusal = `update audit_refusal_windows set suppressed = suppressed + 1,
		first_at = coalesce(first_at, now()), last_at = now(), environment_id = $5::uuid,
		environment = nullif($6, ''), actor_kind = $7, remote_addr = $8, method = $9, path = $10
		where actor = $1 and action = $2 and status = $3 and environment_key = $4`

const insertSummary = `insert into audit_log
		(at, environment_id, environment, actor_kind, actor, remote_addr, action, method, path, status, detail) `

// AuditRefusal records a refused request (e.Status is a 4xx) in the audit
// trail, at most one row per window for each actor, action, status and
// environment: the first refusal of a window gets its row, the later ones
// are counted, and written as one summary row when the window has closed
// (at the next refusal of the kind, or by FlushAuditRefusals). recorded
// tells whether e got its own row.
//
// The windows are rows of PostgreSQL, locked while a refusal is decided,
// so replicas sharing the database share the bound.
func (s *Store) AuditRefusal(ctx context.Context, e AuditEntry, window time.Duration) (recorded bool, err error) {
	if window <= 0 {
		window = DefaultRefusalWindow
	}
	envKey := ""
	if e.EnvironmentID != nil {
		envKey = *e.EnvironmentID
	}
	// A flood's common case, a window open: one statement, which holds the
	// window's row for itself only.
	tag, err := s.pool.Exec(ctx, countRefusal+` and opened_at > now() - $11::interval`,
		e.Actor, e.Action, e.Status, envKey, e.EnvironmentID, e.Environment, e.ActorKind, e.RemoteAddr, e.Method, e.Path, window)
	if err != nil || tag.RowsAffected() == 1 {
		return false, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		recorded = false
		// The window's row exists before it is read (for update), so that
		// two replicas deciding at once decide one after the other.
		if _, err := tx.Exec(ctx, `insert into audit_refusal_windows
			(actor, action, status, environment_key, opened_at, actor_kind)
			values ($1, $2, $3, $4, '-infinity', $5) on conflict do nothing`,
			e.Actor, e.Action, e.Status, envKey, e.ActorKind); err != nil {
			return err
		}
		var open bool
		err := tx.QueryRow(ctx, `select opened_at > now() - $5::interval from audit_refusal_windows
			where actor = $1 and action = $2 and status = $3 and environment_key = $4 for update`,
			e.Actor, e.Action, e.Status, envKey, window).Scan(&open)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no rows: flushed meanwhile, a window to open
			return err
		}
		if open {
			_, err := tx.Exec(ctx, countRefusal,
				e.Actor, e.Action, e.Status, envKey, e.EnvironmentID, e.Environment, e.ActorKind, e.RemoteAddr, e.Method, e.Path)
			return err
		}
		// The window closed: its summary, then this refusal's row, and
		// a new window.
		if _, err := tx.Exec(ctx, insertSummary+refusalSummary+` from audit_refusal_windows w
			where actor = $1 and action = $2 and status = $3 and environment_key = $4 and suppressed > 0`,
			e.Actor, e.Action, e.Status, envKey); err != nil {
			return err
		}
		if err := auditInsert(ctx, tx, e); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `insert into audit_refusal_windows
			(actor, action, status, environment_key, opened_at, actor_kind) values ($1, $2, $3, $4, now(), $5)
			on conflict (actor, action, status, environment_key) do update set opened_at = now(), suppressed = 0,
				first_at = null, last_at = null`,
			e.Actor, e.Action, e.Status, envKey, e.ActorKind); err != nil {
			return err
		}
		recorded = true
		return nil
	})
	return recorded, err
}

// FlushAuditRefusals writes the summary rows of the refusal windows
// that closed (opened more than window ago) and forgets the windows. The
// server's reconciler calls it, so that a summary waits at most a window
// and a reconcile period; replicas may call it at once (a window is
// deleted, and summed up, once). It returns the summaries written.
func (s *Store) FlushAuditRefusals(ctx context.Context, window time.Duration) (int64, error) {
	if window <= 0 {
		window = DefaultRefusalWindow
	}
	tag, err := s.pool.Exec(ctx, `with w as (
			delete from audit_refusal_windows where opened_at <= now() - $1::interval returning *)
		`+insertSummary+refusalSummary+` from w where w.suppressed > 0`, window)
	return tag.RowsAffected(), err
}
