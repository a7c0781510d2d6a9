package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Transfer notifications (issue 14, B.9): ApplyInstanceChange notifies
// TransferChannel in the transfer's transaction, so that a listener hears
// of a version once it is committed, and only then. The payload is small
// (PostgreSQL caps it at 8,000 bytes): "<environment id>/<instance
// id>/<version>"; listeners read the log for the rest.

// TransferChannel is the PostgreSQL notification channel of instance
// transfers.
const TransferChannel = "intend_lsm_transfer"

// TransferNotice is one notification: the instance's version that was
// written.
type TransferNotice struct {
	EnvironmentID string
	InstanceID    string
	Version       int64
}

// notifyTransfer queues the notification of a version in tx: PostgreSQL
// delivers it when tx commits.
func notifyTransfer(ctx context.Context, tx pgx.Tx, envID, instanceID string, version int64) error {
	payload := envID + "/" + instanceID + "/" + strconv.FormatInt(version, 10)
	if _, err := tx.Exec(ctx, `select pg_notify($1, $2)`, TransferChannel, payload); err != nil {
		return fmt.Errorf("notify the transfer of service instance %s: %w", instanceID, err)
	}
	return nil
}

// ParseTransferNotice reads a notification's payload.
func ParseTransferNotice(payload string) (TransferNotice, bool) {
	parts := strings.Split(payload, "/")
	if len(parts) != 3 || !IsUUID(parts[0]) || !IsUUID(parts[1]) {
		return TransferNotice{}, false
	}
	v, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || v < 1 {
		return TransferNotice{}, false
	}
	return TransferNotice{EnvironmentID: strings.ToLower(parts[0]), InstanceID: strings.ToLower(parts[1]), Version: v}, true
}

// ListenTransfers takes one connection out of the pool for itself (it
// does not count against the pool any more), listens on TransferChannel
// and calls notice for every notification, in the order PostgreSQL
// delivers them, until ctx ends or the connection fails; listening is
// called once the LISTEN is in place (anything committed before it may
// have been missed: poll then). The connection is closed on return. The
// returned error is ctx's when ctx ended.
func (s *Store) ListenTransfers(ctx context.Context, listening func(), notice func(TransferNotice)) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen for transfers: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "listen "+TransferChannel); err != nil {
		return fmt.Errorf("listen for transfers: %w", err)
	}
	if listening != nil {
		listening()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("wait for transfer notifications: %w", err)
		}
		if t, ok := ParseTransferNotice(n.Payload); ok {
			notice(t)
		}
	}
}

// InstanceLogAfter returns the instance's log entries after version
// after, oldest first, at most limit of them.
func (s *Store) InstanceLogAfter(ctx context.Context, envID, instanceID string, after int64, limit int) ([]InstanceLogEntry, error) {
	rows, err := s.pool.Query(ctx, `select version, state, candidate_attributes, active_attributes, rollback_attributes,
		event, errors, created_at from service_instance_log
		where environment_id = $1::uuid and instance_id = $2::uuid and version > $3
		order by version limit $4`, envID, instanceID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (InstanceLogEntry, error) {
		var e InstanceLogEntry
		err := row.Scan(&e.Version, &e.State, &e.Candidate, &e.Active, &e.Rollback, &e.Event, &e.Errors, &e.CreatedAt)
		return e, err
	})
}

// InstanceVersions returns the current version of each of the instances
// (by instance id; ids the inventory does not have are left out), in one
// query: the event streams' fallback poll.
func (s *Store) InstanceVersions(ctx context.Context, instanceIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(instanceIDs))
	if len(instanceIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `select id::text, version from service_instances where id = any($1::uuid[])`, instanceIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
