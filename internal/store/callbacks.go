package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LSM callbacks: URLs a client registers per environment or per service
// entity, and their transactional outbox. An environment's notification
// webhook (notifications.go) is a callback of kind notifications: the
// same outbox and dispatcher deliver it, and everything LSM here
// (transfers, the /lsm/v1/callbacks lists) leaves it out. Every transfer of an instance
// (ApplyInstanceChange) writes, in the statement that writes its log row,
// one lsm_callback_events row per matching callback with the JSON body
// to send, and notifies CallbackChannel when there was one; the
// dispatchers of intend server claim due rows (ClaimCallbackEvents), POST
// them and record the outcome. A row of version n+1 of an instance is
// never claimed while the callback's row of version n is pending: the
// order per (callback, instance) is the instances' version order.

// CallbackChannel is the PostgreSQL channel a transfer that wrote outbox
// rows notifies on commit.
const CallbackChannel = "intend_lsm_callbacks"

// MaxCallbacksPerEnvironment bounds the callbacks of an environment,
// and so the outbox rows one transfer writes.
const MaxCallbacksPerEnvironment = 50

// Callback is a registered callback, without its secret.
type Callback struct {
	ID            string        `json:"id"`
	EnvironmentID string        `json:"environment"`
	ServiceEntity string        `json:"service_entity,omitempty"`
	URL           string        `json:"url"`
	Description   string        `json:"description"`
	CreatedBy     string        `json:"created_by"`
	CreatedAt     time.Time     `json:"created_at"`
	Stats         CallbackStats `json:"deliveries"`
}

// CallbackStats counts a callback's outbox rows (delivered ones are
// pruned after their retention).
type CallbackStats struct {
	Pending   int `json:"pending"`
	Delivered int `json:"delivered"`
	// Dead are the events given up on.
	Dead            int        `json:"dead"`
	LastDeliveredAt *time.Time `json:"last_delivered_at,omitempty"`
	// LastError is the error of the newest failed attempt, with its time.
	LastError     string     `json:"last_error,omitempty"`
	LastErrorAt   *time.Time `json:"last_error_at,omitempty"`
	OldestPending *time.Time `json:"oldest_pending,omitempty"`
}

// CallbackEvent is one outbox row, as the API shows it.
type CallbackEvent struct {
	InstanceID    string     `json:"instance_id"`
	Version       int64      `json:"version"`
	EventID       string     `json:"event_id"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	LastStatus    *int       `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

// NewCallback is a callback to register.
type NewCallback struct {
	// ServiceEntity limits it to one entity's instances ("": all).
	ServiceEntity string
	URL           string
	Description   string
	Secret        string
	CreatedBy     string
}

// CreateCallback registers a callback in the environment; ErrConflict
// when it has MaxCallbacksPerEnvironment already.
func (s *Store) CreateCallback(ctx context.Context, envID string, nc NewCallback) (Callback, error) {
	var cb Callback
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `select count(*) from lsm_callbacks where environment_id = $1::uuid and kind = 'lsm'`,
			envID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxCallbacksPerEnvironment {
			return Conflict("the environment has %d callbacks, the most it may have", n)
		}
		var entity *string
		if nc.ServiceEntity != "" {
			entity = &nc.ServiceEntity
		}
		var id string
		if err := tx.QueryRow(ctx, `insert into lsm_callbacks (environment_id, entity, url, description, secret, created_by)
			values ($1::uuid, $2, $3, $4, $5, $6) returning id::text`,
			envID, entity, nc.URL, nc.Description, nc.Secret, nc.CreatedBy).Scan(&id); err != nil {
			return fmt.Errorf("register callback: %w", err)
		}
		var err error
		cb, err = getCallback(ctx, tx, envID, id)
		return err
	})
	return cb, err
}

const callbackColumns = `c.id::text, c.environment_id::text, coalesce(c.entity, ''), c.url, c.description,
	c.created_by, c.created_at,
	(select count(*) from lsm_callback_events e where e.callback_id = c.id and e.status = 'pending'),
	(select count(*) from lsm_callback_events e where e.callback_id = c.id and e.status = 'delivered'),
	(select count(*) from lsm_callback_events e where e.callback_id = c.id and e.status = 'dead'),
	(select max(done_at) from lsm_callback_events e where e.callback_id = c.id and e.status = 'delivered'),
	(select min(created_at) from lsm_callback_events e where e.callback_id = c.id and e.status = 'pending'),
	f.last_error, f.last_attempt_at`

const callbackFrom = `from lsm_callbacks c left join lateral (
		select e.last_error, e.last_attempt_at from lsm_callback_events e
		where e.callback_id = c.id and e.last_error is not null
		order by e.last_attempt_at desc limit 1) f on true`

func scanCallback(row pgx.Row) (Callback, error) {
	var cb Callback
	var lastErr *string
	err := row.Scan(&cb.ID, &cb.EnvironmentID, &cb.ServiceEntity, &cb.URL, &cb.Description, &cb.CreatedBy,
		&cb.CreatedAt, &cb.Stats.Pending, &cb.Stats.Delivered, &cb.Stats.Dead, &cb.Stats.LastDeliveredAt,
		&cb.Stats.OldestPending, &lastErr, &cb.Stats.LastErrorAt)
	if lastErr != nil {
		cb.Stats.LastError = *lastErr
	}
	return cb, err
}

func getCallback(ctx context.Context, q querier, envID, id string) (Callback, error) {
	if !IsUUID(id) {
		return Callback{}, NotFound("callback %s", id)
	}
	cb, err := scanCallback(q.QueryRow(ctx, `select `+callbackColumns+` `+callbackFrom+`
		where c.environment_id = $1::uuid and c.id = $2::uuid and c.kind = 'lsm'`, envID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return cb, NotFound("callback %s", id)
	}
	return cb, err
}

// GetCallback returns a callback of the environment with its delivery
// counts.
func (s *Store) GetCallback(ctx context.Context, envID, id string) (Callback, error) {
	return getCallback(ctx, s.pool, envID, id)
}

// ListCallbacks returns the environment's callbacks, oldest first, with
// their delivery counts.
func (s *Store) ListCallbacks(ctx context.Context, envID string) ([]Callback, error) {
	return s.ListCallbacksPage(ctx, envID, nil, 0)
}

// ListCallbacksPage returns at most limit (0: every) callbacks of
// ListCallbacks after the one after names (nil: from the oldest), oldest
// first (then by id).
func (s *Store) ListCallbacksPage(ctx context.Context, envID string, after *PageKey, limit int) ([]Callback, error) {
	var at *time.Time
	var id *string
	if after != nil {
		if !IsUUID(after.ID) {
			return nil, NotFound("callback %q", after.ID)
		}
		at, id = &after.At, &after.ID
	}
	rows, err := s.pool.Query(ctx, `select `+callbackColumns+` `+callbackFrom+`
		where c.environment_id = $1::uuid and c.kind = 'lsm' and ($2::timestamptz is null or (c.created_at, c.id) > ($2, $3::uuid))
		order by c.created_at, c.id limit nullif($4, 0)`, envID, at, id, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Callback, error) { return scanCallback(row) })
}

// CallbackEvents returns a callback's outbox rows of one status, newest
// first, at most limit.
func (s *Store) CallbackEvents(ctx context.Context, callbackID, status string, limit int) ([]CallbackEvent, error) {
	rows, err := s.pool.Query(ctx, `select instance_id::text, version, event_id::text, status, attempts,
		last_status, coalesce(last_error, ''), last_attempt_at, created_at
		from lsm_callback_events where callback_id = $1::uuid and status = $2
		order by created_at desc, instance_id, version desc limit $3`, callbackID, status, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (CallbackEvent, error) {
		var e CallbackEvent
		err := row.Scan(&e.InstanceID, &e.Version, &e.EventID, &e.Status, &e.Attempts, &e.LastStatus,
			&e.LastError, &e.LastAttemptAt, &e.CreatedAt)
		return e, err
	})
}

// DeleteCallback removes a callback and its undelivered events: no
// delivery starts after it (one under way may still arrive).
func (s *Store) DeleteCallback(ctx context.Context, envID, id string) (Callback, error) {
	var cb Callback
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if cb, err = getCallback(ctx, tx, envID, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `delete from lsm_callbacks where id = $1::uuid`, id)
		return err
	})
	return cb, err
}

// logTransfer writes an instance version's log row and, in the same
// statement, one outbox row per callback of the environment that hears
// of the instance's entity, notifying CallbackChannel on commit when it
// wrote any. Without callbacks it costs an index probe of an empty
// lsm_callbacks range and no round trip (BenchmarkApplyInstanceChange).
// The payload is the callbacks.Event of the transfer; its event id is
// derived from (environment, instance, version), so a transfer has one
// id whichever callback gets it.
func logTransfer(ctx context.Context, tx pgx.Tx, envID string, ch InstanceChange, event json.RawMessage) error {
	var identity *string
	if ch.Identity != "" {
		identity = &ch.Identity
	}
	_, err := tx.Exec(ctx, `
		with log as (
			insert into service_instance_log (environment_id, instance_id, version, state,
				candidate_attributes, active_attributes, rollback_attributes, event, errors,
				candidate_version, active_version, rollback_version)
			values ($1::uuid, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $12, $13, $14)),
		outbox as (
			insert into lsm_callback_events (callback_id, instance_id, version, event_id, next_attempt_at, payload)
			select c.id, $2::uuid, $3, md5($1::text || '/' || $2::text || '/' || $3::text)::uuid,
				-- parked behind an earlier version still pending (see releaseNext)
				case when exists (select 1 from lsm_callback_events p
				    where p.callback_id = c.id and p.instance_id = $2::uuid and p.status = 'pending' for share)
				  then 'infinity'::timestamptz else now() end,
				jsonb_build_object(
					'event_id', md5($1::text || '/' || $2::text || '/' || $3::text)::uuid,
					'environment', $1::uuid,
					'environment_name', (select name from environments where id = $1::uuid),
					'service_entity', $10::text,
					'instance_id', $2::uuid,
					'identity', $11::text,
					'version', $3::bigint,
					'source_state', $8::jsonb->>'source',
					'target_state', $4::text,
					'trigger', $8::jsonb->>'trigger',
					'error', coalesce(($8::jsonb->>'error')::boolean, false),
					'operations', coalesce($8::jsonb->'operations', '[]'::jsonb),
					'actor', coalesce(nullif($8::jsonb->>'actor', ''), '`+SystemActor+`'),
					'time', now())
			from lsm_callbacks c
			where c.environment_id = $1::uuid and c.kind = 'lsm' and (c.entity is null or c.entity = $10::text)
			returning 1)
		select pg_notify('`+CallbackChannel+`', $1::text) where exists (select 1 from outbox)`,
		envID, ch.ID, ch.Version, ch.State, ch.Sets.Candidate, ch.Sets.Active, ch.Sets.Rollback, event,
		nullIfEmptyJSON(ch.Errors), ch.Entity, identity, setVersion(ch.Sets.Candidate, ch.Sets.CandidateVersion),
		setVersion(ch.Sets.Active, ch.Sets.ActiveVersion), setVersion(ch.Sets.Rollback, ch.Sets.RollbackVersion))
	if err != nil {
		return fmt.Errorf("log service instance %s: %w", ch.ID, err)
	}
	return nil
}

// CallbackDelivery is a claimed outbox row: the event to POST, where,
// and the claim (LeaseToken) that records its outcome.
type CallbackDelivery struct {
	CallbackID string
	InstanceID string
	Version    int64
	EventID    string
	Payload    []byte
	// Attempts counts this one.
	Attempts   int
	CreatedAt  time.Time
	URL        string
	Secret     string
	LeaseToken string
}

// ClaimCallbackEvents claims up to limit due events for lease: pending
// ones whose next attempt is due, unclaimed or whose claim expired (its
// dispatcher died), and whose callback has no pending event of an
// earlier version of the same instance (such an event is parked, not
// due, too: see releaseNext; the check stays as the rule itself).
// Claiming counts an attempt.
// Concurrent dispatchers claim different rows (skip locked).
func (s *Store) ClaimCallbackEvents(ctx context.Context, limit int, lease time.Duration) ([]CallbackDelivery, error) {
	rows, err := s.pool.Query(ctx, `
		with due as (
			select e.callback_id, e.instance_id, e.version from lsm_callback_events e
			where e.status = 'pending' and e.next_attempt_at <= now()
			  and (e.lease_until is null or e.lease_until < now())
			  and not exists (select 1 from lsm_callback_events p
			      where p.callback_id = e.callback_id and p.instance_id = e.instance_id
			        and p.version < e.version and p.status = 'pending')
			order by e.next_attempt_at, e.version
			limit $1
			for update of e skip locked)
		update lsm_callback_events e set attempts = e.attempts + 1, lease_token = gen_random_uuid(),
			lease_until = now() + $2::interval, last_attempt_at = now()
		from due, lsm_callbacks c
		where e.callback_id = due.callback_id and e.instance_id = due.instance_id and e.version = due.version
		  and c.id = e.callback_id
		returning e.callback_id::text, e.instance_id::text, e.version, e.event_id::text, e.payload::text,
			e.attempts, e.created_at, c.url, c.secret, e.lease_token::text`, limit, lease)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (CallbackDelivery, error) {
		var d CallbackDelivery
		var payload string
		err := row.Scan(&d.CallbackID, &d.InstanceID, &d.Version, &d.EventID, &payload, &d.Attempts, &d.CreatedAt,
			&d.URL, &d.Secret, &d.LeaseToken)
		d.Payload = []byte(payload)
		return d, err
	})
}

// CallbackDelivered records a delivery's success (status, the HTTP
// status) and makes the instance's next event due. A second delivery of
// the same event (a claim that expired while its request was under way)
// changes nothing.
func (s *Store) CallbackDelivered(ctx context.Context, d CallbackDelivery, status int) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `update lsm_callback_events set status = 'delivered', done_at = now(),
			lease_token = null, lease_until = null, last_status = $4
			where callback_id = $1::uuid and instance_id = $2::uuid and version = $3 and status = 'pending'`,
			d.CallbackID, d.InstanceID, d.Version, status)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return releaseNext(ctx, tx, d)
	})
}

// releaseNext makes due the event that waited, parked, behind d's: the
// callback's next pending version of the instance. An event is parked
// (next_attempt_at infinity) when it is written while an earlier one is
// pending, so a claim reads only the heads of the queues, however long
// they are. The writer share-locks the pending rows it parks behind, so
// a completion either commits before the writer looks (nothing parked)
// or waits for the writer's commit, and then this statement, which
// starts after the wait, sees the parked row.
func releaseNext(ctx context.Context, tx pgx.Tx, d CallbackDelivery) error {
	_, err := tx.Exec(ctx, `update lsm_callback_events set next_attempt_at = now()
		where callback_id = $1::uuid and instance_id = $2::uuid and status = 'pending'
		  and next_attempt_at = 'infinity'
		  and version = (select min(version) from lsm_callback_events
		      where callback_id = $1::uuid and instance_id = $2::uuid and status = 'pending' and version > $3)`,
		d.CallbackID, d.InstanceID, d.Version)
	return err
}

// UnparkCallbackEvents makes due the parked events with no pending
// event before them: none should be (releaseNext), so this is a
// safety net the dispatchers run now and then, not a path events take.
func (s *Store) UnparkCallbackEvents(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `update lsm_callback_events e set next_attempt_at = now()
		where e.status = 'pending' and e.next_attempt_at = 'infinity'
		  and not exists (select 1 from lsm_callback_events p
		      where p.callback_id = e.callback_id and p.instance_id = e.instance_id
		        and p.version < e.version and p.status = 'pending')`)
	return tag.RowsAffected(), err
}

// CallbackFailed records a failed attempt under d's claim: the HTTP
// status (0: no answer), the error, and either the next attempt's time
// or, when dead, that it was given up on (the instance's next event may
// go). A claim that expired and was taken over records nothing.
func (s *Store) CallbackFailed(ctx context.Context, d CallbackDelivery, status int, reason string, next time.Time, dead bool) error {
	var st *int
	if status > 0 {
		st = &status
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `update lsm_callback_events set
			status = case when $7 then 'dead' else 'pending' end,
			done_at = case when $7 then now() end,
			next_attempt_at = $6, lease_token = null, lease_until = null, last_status = $4, last_error = $5
			where callback_id = $1::uuid and instance_id = $2::uuid and version = $3 and status = 'pending'
			  and lease_token = $8::uuid`,
			d.CallbackID, d.InstanceID, d.Version, st, reason, next, dead, d.LeaseToken)
		if err != nil || !dead || tag.RowsAffected() == 0 {
			return err
		}
		return releaseNext(ctx, tx, d)
	})
}

// PruneCallbackEvents deletes delivered events older than delivered and
// dead ones older than dead, DefaultPruneChunk at a time (found through
// lsm_callback_events_done).
func (s *Store) PruneCallbackEvents(ctx context.Context, delivered, dead time.Duration) (int64, error) {
	var n int64
	for {
		tag, err := s.pool.Exec(ctx, `delete from lsm_callback_events where ctid = any(array(
			select ctid from lsm_callback_events
			where status <> 'pending' and done_at < now() - least($1::interval, $2::interval)
			  and ((status = 'delivered' and done_at < now() - $1::interval)
			       or (status = 'dead' and done_at < now() - $2::interval))
			limit $3))`,
			delivered, dead, DefaultPruneChunk)
		n += tag.RowsAffected()
		if err != nil || tag.RowsAffected() < DefaultPruneChunk {
			return n, err
		}
	}
}

// ListenCallbacks listens on CallbackChannel on a connection of its own
// and calls notify once it listens (what was written before may be
// due) and for every notification, until ctx ends or the connection
// fails (its error).
func (s *Store) ListenCallbacks(ctx context.Context, notify func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection listens: it never goes back to the pool.
	c := conn.Hijack()
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, `listen `+CallbackChannel); err != nil {
		return err
	}
	notify()
	for {
		if _, err := c.WaitForNotification(ctx); err != nil {
			return err
		}
		notify()
	}
}

// SetNotificationWebhook makes url, signed with secret, the
// environment's notification webhook, replacing the one it had: the
// notifications not yet delivered go to the new URL, signed with the new
// secret.
func (s *Store) SetNotificationWebhook(ctx context.Context, envID, url, secret, createdBy string) (Callback, error) {
	var cb Callback
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := lockEnvironment(ctx, tx, envID); err != nil {
			return err
		}
		var id string
		// The entity is one no service entity can be called: a server
		// of the previous release (a rolling upgrade), which knows no
		// kind, then sends it no transfer.
		if err := tx.QueryRow(ctx, `insert into lsm_callbacks (environment_id, kind, entity, url, description, secret, created_by)
			values ($1::uuid, 'notifications', '`+notificationWebhookEntity+`', $2, 'notification webhook', $3, $4)
			on conflict (environment_id) where kind = 'notifications' do update
			set url = excluded.url, secret = excluded.secret, created_by = excluded.created_by, created_at = now()
			returning id::text`, envID, url, secret, createdBy).Scan(&id); err != nil {
			return fmt.Errorf("set the notification webhook: %w", err)
		}
		var err error
		cb, err = notificationWebhook(ctx, tx, envID)
		return err
	})
	return cb, err
}

func notificationWebhook(ctx context.Context, q querier, envID string) (Callback, error) {
	cb, err := scanCallback(q.QueryRow(ctx, `select `+callbackColumns+` `+callbackFrom+`
		where c.environment_id = $1::uuid and c.kind = 'notifications'`, envID))
	if errors.Is(err, pgx.ErrNoRows) {
		return cb, NotFound("notification webhook: the environment has none")
	}
	cb.ServiceEntity = ""
	return cb, err
}

// notificationWebhookEntity is the entity of a notification webhook's
// row: not a name a service entity may have.
const notificationWebhookEntity = "#notifications"

// NotificationWebhook returns the environment's notification webhook
// with its delivery counts (never its secret); ErrNotFound when it has
// none.
func (s *Store) NotificationWebhook(ctx context.Context, envID string) (Callback, error) {
	return notificationWebhook(ctx, s.pool, envID)
}

// DeleteNotificationWebhook removes the environment's notification
// webhook and its undelivered events.
func (s *Store) DeleteNotificationWebhook(ctx context.Context, envID string) (Callback, error) {
	var cb Callback
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if cb, err = notificationWebhook(ctx, tx, envID); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `delete from lsm_callbacks where id = $1::uuid`, cb.ID)
		return err
	})
	return cb, err
}
