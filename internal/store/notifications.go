package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notifications: what an environment's operators should look at,
// written in the transaction of the event (a compile that failed, a
// deploy or repair run that finished with failures) or by the
// reconciler's check (an agent without a live executor for longer than
// agent_timeout). One condition is one notification: while the
// notification of a subject is unresolved, the same condition again
// counts an occurrence on it (and points it at the newest compile or
// run) instead of adding a row; a compile that succeeds, a run without
// failures, a live executor for the agent resolve it, and the next
// occurrence after that is a new notification. Every new notification
// is also written, in the same statement, to the LSM callbacks' outbox
// for the environment's notification webhook (a callback of kind
// notifications), which the callbacks' dispatcher signs and delivers at
// least once.

// The kinds of notification.
const (
	NotifyCompileFailed        = "compile_failed"
	NotifyRunFailed            = "run_failed"
	NotifyAgentWithoutExecutor = "agent_without_executor"
)

// MaxNotificationsPerEnvironment bounds the resolved notifications an
// environment keeps whatever notification_retention says: the prune
// deletes the oldest beyond it. Unresolved ones are at most one per
// subject (two plus one per agent).
const MaxNotificationsPerEnvironment = 1000

// maxNotificationMessage bounds a notification's message (a compile's
// first error can be long).
const maxNotificationMessage = 2000

// Notification is one notification of an environment.
type Notification struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Title    string `json:"title"`
	Message  string `json:"message"`
	// Compile, Run and Agent link to what it is about: the newest
	// occurrence's compile or run, or the agent.
	Compile     *int64     `json:"compile,omitempty"`
	Run         *int64     `json:"run,omitempty"`
	Agent       string     `json:"agent,omitempty"`
	Occurrences int        `json:"occurrences"`
	CreatedAt   time.Time  `json:"created_at"`
	LastSeenAt  time.Time  `json:"last_seen_at"`
	ResolvedAt  *time.Time `json:"resolved_at,omitempty"`
	ReadAt      *time.Time `json:"read_at,omitempty"`
	ClearedAt   *time.Time `json:"cleared_at,omitempty"`
}

const notificationColumns = `id::text, kind, severity, title, message, compile_id, run, coalesce(agent, ''),
	occurrences, created_at, last_seen_at, resolved_at, read_at, cleared_at`

func scanNotification(row pgx.Row) (Notification, error) {
	var n Notification
	err := row.Scan(&n.ID, &n.Kind, &n.Severity, &n.Title, &n.Message, &n.Compile, &n.Run, &n.Agent,
		&n.Occurrences, &n.CreatedAt, &n.LastSeenAt, &n.ResolvedAt, &n.ReadAt, &n.ClearedAt)
	return n, err
}

// notifyOutbox is the CTE of a statement that writes the new
// notifications of its CTE n (those with n.inserted) to the outbox of
// their environment's notification webhook; notifyDispatchers, its
// last select, notifies the dispatchers when it wrote any. The payload
// is a callbacks.Notification; the event id is the notification's id.
const notifyOutbox = `,
	outbox as (
		insert into lsm_callback_events (callback_id, instance_id, version, event_id, payload)
		select c.id, n.id, 1, n.id, jsonb_build_object(
			'event_id', n.id,
			'environment', n.environment_id,
			'environment_name', (select name from environments where id = n.environment_id),
			'id', n.id, 'kind', n.kind, 'severity', n.severity, 'title', n.title, 'message', n.message,
			'compile', n.compile_id, 'run', n.run, 'agent', n.agent, 'time', n.created_at)
		from n join lsm_callbacks c on c.environment_id = n.environment_id and c.kind = 'notifications'
		where n.inserted
		returning 1)`

const notifyDispatchers = `
	select pg_notify('` + CallbackChannel + `', '') where exists (select 1 from outbox)`

// notify records an occurrence of a condition in tx: a new notification,
// or one more occurrence of the subject's unresolved one (which then
// links to this occurrence's compile or run, and says its message).
func notify(ctx context.Context, tx pgx.Tx, envID, kind, severity, subject, title, message string, compile, run *int64) error {
	if len(message) > maxNotificationMessage {
		message = message[:maxNotificationMessage] + "…"
	}
	message = strings.ToValidUTF8(strings.ReplaceAll(message, "\x00", ""), "?")
	_, err := tx.Exec(ctx, `
		with n as (
			insert into notifications (environment_id, kind, severity, subject, title, message, compile_id, run)
			values ($1::uuid, $2, $3, $4, $5, $6, $7, $8)
			on conflict (environment_id, subject) where resolved_at is null do update
			set occurrences = notifications.occurrences + 1, last_seen_at = now(), title = excluded.title,
				message = excluded.message, compile_id = excluded.compile_id, run = excluded.run
			returning *, xmax = 0 as inserted)`+notifyOutbox+notifyDispatchers,
		envID, kind, severity, subject, title, message, compile, run)
	if err != nil {
		return fmt.Errorf("record notification %s: %w", subject, err)
	}
	return nil
}

// resolveNotification marks the subject's unresolved notification
// resolved: its condition ended.
func resolveNotification(ctx context.Context, tx pgx.Tx, envID, subject string) error {
	_, err := tx.Exec(ctx, `update notifications set resolved_at = now()
		where environment_id = $1::uuid and subject = $2 and resolved_at is null`, envID, subject)
	if err != nil {
		return fmt.Errorf("resolve notification %s: %w", subject, err)
	}
	return nil
}

// compileFinished records what a compile that just finished means for
// the environment's notifications: a failure notifies (with its first
// error), a success resolves.
func compileFinished(ctx context.Context, tx pgx.Tx, envID string, c Compile) error {
	if c.Status == CompileSucceeded {
		return resolveNotification(ctx, tx, envID, NotifyCompileFailed)
	}
	var errs []struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(c.Errors, &errs)
	msg := "the compile failed"
	if len(errs) > 0 {
		msg = errs[0].Message
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and %d more errors)", len(errs)-1)
		}
	}
	id := c.ID
	return notify(ctx, tx, envID, NotifyCompileFailed, "error", NotifyCompileFailed,
		fmt.Sprintf("Compile %d failed", c.ID), msg, &id, nil)
}

// runFinished records what a deploy or repair run that just finished
// means for the environment's notifications: failed resources (or a
// run that failed to start) notify, a run without failures resolves.
// Dry-runs change nothing: they report, they do not deploy.
func runFinished(ctx context.Context, tx pgx.Tx, envID string, run int64, status string, c RunCounts) error {
	var action string
	var version int64
	var total int
	err := tx.QueryRow(ctx, `select action, version, total from deploy_runs where environment_id = $1::uuid and run = $2`,
		envID, run).Scan(&action, &version, &total)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && action == "dryrun" {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case status == "done" && c.Failed == 0:
		return resolveNotification(ctx, tx, envID, NotifyRunFailed)
	case status == "failed" || c.Failed > 0:
		msg := fmt.Sprintf("%d of %d resources failed in the %s of version %d", c.Failed, total, action, version)
		if total < c.Failed {
			msg = fmt.Sprintf("%d resources failed in the %s of version %d", c.Failed, action, version)
		}
		if c.Failed == 0 {
			msg = fmt.Sprintf("the %s of version %d failed", action, version)
		}
		return notify(ctx, tx, envID, NotifyRunFailed, "error", NotifyRunFailed,
			fmt.Sprintf("Run %d finished with failures", run), msg, nil, &run)
	}
	return nil
}

// AgentCheck is an environment whose agents CheckAgentExecutors looks
// at, and how long an agent may be without a live executor (its
// agent_timeout).
type AgentCheck struct {
	EnvironmentID string
	Timeout       time.Duration
	// NotBefore is when the caller started watching (zero: no bound):
	// an agent counts as without executor from then at the earliest,
	// so that executors that could not report while no server ran (an
	// outage, an upgrade) are not taken for gone.
	NotBefore time.Time
}

// CheckAgentExecutors notifies, in each environment of envs, of every
// agent that the released version names and that has had no live
// executor (ExecutorLiveWithin) for longer than the environment's
// timeout: counted from the last time an executor serving it was seen
// or stopped, or from when the agent appeared, and not before the
// check's NotBefore. An agent already notified
// of is not notified again while its notification is unresolved; one
// that has a live executor again (or that the released version no
// longer names) has its notification resolved. It returns how many
// notifications it wrote. Idempotent, so every replica's reconciler may
// run it.
func (s *Store) CheckAgentExecutors(ctx context.Context, envs []AgentCheck) (int64, error) {
	if len(envs) == 0 {
		return 0, nil
	}
	ids := make([]string, len(envs))
	secs := make([]float64, len(envs))
	notBefore := make([]*time.Time, len(envs))
	for i, e := range envs {
		ids[i], secs[i] = e.EnvironmentID, e.Timeout.Seconds()
		if !e.NotBefore.IsZero() {
			notBefore[i] = &e.NotBefore
		}
	}
	if _, err := s.pool.Exec(ctx, `update notifications n set resolved_at = now()
		where n.environment_id = any($1::uuid[]) and n.kind = '`+NotifyAgentWithoutExecutor+`' and n.resolved_at is null
		  and (exists (select 1 from executors x where x.environment_id = n.environment_id and n.agent = any(x.agents)
		               and x.stopped_at is null and x.last_seen > now() - make_interval(secs => $2))
		       or not exists (select 1 from resource_state rs where rs.environment_id = n.environment_id
		               and rs.agent = n.agent and rs.intent_hash is not null))`,
		ids, ExecutorLiveWithin.Seconds()); err != nil {
		return 0, fmt.Errorf("resolve agent notifications: %w", err)
	}
	var n int64
	err := s.pool.QueryRow(ctx, `
		with envs as (select * from unnest($1::uuid[], $2::float8[], $4::timestamptz[]) as t(id, timeout, not_before)),
		-- per agent named by an executor: when one was last seen (or
		-- stopped), and whether one is live: the executors' agents are
		-- unnested and joined, not searched per agent (1,000 agents on
		-- one executor, 100,000 resources, all served: 1-2 ms a pass
		-- rather than 70-750 ms, at a load of 12-15)
		served as (
			select x.environment_id, x.agent, max(coalesce(x.stopped_at, x.last_seen)) as seen,
				bool_or(x.stopped_at is null and x.last_seen > now() - make_interval(secs => $3)) as live
			from (select environment_id, unnest(agents) as agent, stopped_at, last_seen from executors
			      where environment_id in (select id from envs)) x
			group by 1, 2),
		lost as (
			select a.environment_id, a.name, envs.timeout, greatest(a.first_seen, s.seen) as since, envs.not_before
			from envs join agents a on a.environment_id = envs.id
			left join served s on s.environment_id = a.environment_id and s.agent = a.name
			where s.live is not true
			  and exists (select 1 from resource_state rs where rs.environment_id = a.environment_id
			                and rs.agent = a.name and rs.intent_hash is not null)),
		n as (
			insert into notifications (environment_id, kind, severity, subject, title, message, agent)
			select environment_id, '`+NotifyAgentWithoutExecutor+`', 'warning', '`+NotifyAgentWithoutExecutor+`/' || name,
				'Agent ' || name || ' has no executor',
				'no live executor has served agent ' || name || ' since ' ||
				    to_char(since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
				    ': its resources are not deployed (they are recorded unavailable after agent_timeout)',
				name
			from lost where greatest(since, not_before) < now() - make_interval(secs => timeout)
			on conflict (environment_id, subject) where resolved_at is null do nothing
			returning *, true as inserted)`+notifyOutbox+`,
		woken as (`+notifyDispatchers+`)
		select (select count(*) from n), (select count(*) from woken)`,
		ids, secs, ExecutorLiveWithin.Seconds(), notBefore).Scan(&n, new(int64))
	if err != nil {
		return 0, fmt.Errorf("notify of agents without executor: %w", err)
	}
	return n, nil
}

// NotificationFilter says which notifications a list shows.
type NotificationFilter struct {
	// Unread: only those not read (and not cleared).
	Unread bool
	// Cleared: cleared ones too.
	Cleared bool
}

// ListNotifications returns at most limit (0: every) notifications of
// the environment after the one after names (nil: from the newest),
// newest first (then by id, descending).
func (s *Store) ListNotifications(ctx context.Context, envID string, f NotificationFilter, after *PageKey, limit int) ([]Notification, error) {
	var at *time.Time
	var id *string
	if after != nil {
		if !IsUUID(after.ID) {
			return nil, NotFound("notification %q", after.ID)
		}
		at, id = &after.At, &after.ID
	}
	rows, err := s.pool.Query(ctx, `select `+notificationColumns+` from notifications
		where environment_id = $1::uuid and ($2::timestamptz is null or (created_at, id) < ($2, $3::uuid))
		  and ($4 or cleared_at is null) and (not $5 or (read_at is null and cleared_at is null))
		order by created_at desc, id desc limit nullif($6, 0)`, envID, at, id, f.Cleared, f.Unread, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Notification, error) { return scanNotification(row) })
}

// UnreadNotifications counts the environment's notifications that are
// neither read nor cleared.
func (s *Store) UnreadNotifications(ctx context.Context, envID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `select count(*) from notifications
		where environment_id = $1::uuid and read_at is null and cleared_at is null`, envID).Scan(&n)
	return n, err
}

// GetNotification returns one notification of the environment.
func (s *Store) GetNotification(ctx context.Context, envID, id string) (Notification, error) {
	if !IsUUID(id) {
		return Notification{}, NotFound("notification %s", id)
	}
	n, err := scanNotification(s.pool.QueryRow(ctx, `select `+notificationColumns+` from notifications
		where environment_id = $1::uuid and id = $2::uuid`, envID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return n, NotFound("notification %s", id)
	}
	return n, err
}

// MarkNotification sets or unsets a notification's read and cleared
// marks (nil: unchanged); setting a mark set already keeps its time.
func (s *Store) MarkNotification(ctx context.Context, envID, id string, read, cleared *bool) (Notification, error) {
	if !IsUUID(id) {
		return Notification{}, NotFound("notification %s", id)
	}
	n, err := scanNotification(s.pool.QueryRow(ctx, `update notifications set
		read_at = case when $3::boolean is null then read_at when $3 then coalesce(read_at, now()) end,
		cleared_at = case when $4::boolean is null then cleared_at when $4 then coalesce(cleared_at, now()) end
		where environment_id = $1::uuid and id = $2::uuid returning `+notificationColumns, envID, id, read, cleared))
	if errors.Is(err, pgx.ErrNoRows) {
		return n, NotFound("notification %s", id)
	}
	return n, err
}

// pruneNotifications deletes the resolved notifications of envID last
// seen before before (nil: none by age) and, whatever their age, the
// oldest resolved ones beyond MaxNotificationsPerEnvironment. Unresolved
// ones stay: each holds its subject's place (a notification cleared
// while its agent is still without executor would come back otherwise).
func (s *Store) pruneNotifications(ctx context.Context, envID string, before *time.Time, out Pruned) error {
	tag, err := s.pool.Exec(ctx, `delete from notifications where id = any(array(
		select id from notifications where environment_id = $1::uuid and resolved_at is not null
		  and ($2::timestamptz is not null and last_seen_at < $2
		       or id not in (select id from notifications where environment_id = $1::uuid and resolved_at is not null
		                     order by created_at desc, id desc limit $3))))`,
		envID, before, MaxNotificationsPerEnvironment)
	if n := tag.RowsAffected(); n > 0 {
		out[TableNotifications] += n
	}
	return err
}
