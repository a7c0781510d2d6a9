package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err, from any method of Store, means that
// PostgreSQL could not be reached or went away (connection refused, reset
// or closed; the server shutting down, crashed or still starting) rather
// than that the statement itself failed. The same call may succeed once the
// database is back, so callers that must not lose work wait and try again
// (see ExecuteBatch). A cancelled or expired context is not unavailability.
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// No session at all, whatever the server said when it refused one
		// (a database that takes no connections now, SQLSTATE 55000, too).
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01 admin_shutdown, 57P02
		// crash_shutdown, 57P03 cannot_connect_now.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne net.Error
	return errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// ActionRecorded reports whether rec is in the action log already: after a
// write whose commit was cut off by a lost connection, whether it happened
// is unknown, and writing it again would double it. An attempt is told
// apart by its workflow, run, activity attempt and start time.
func (s *Store) ActionRecorded(ctx context.Context, envID string, rec ActionRecord) (bool, error) {
	var found bool
	err := s.pool.QueryRow(ctx, `select exists (select 1 from action_log
		where workflow_id = $2 and resource_id = $3 and environment_id = $1::uuid
		  and run_id = $4 and attempt = $5 and started_at = $6)`,
		envID, rec.WorkflowID, rec.ResourceID, rec.RunID, rec.Attempt, rec.StartedAt).Scan(&found)
	return found, err
}
