-- Notifications (issue 27): what an environment's operators should look
-- at, written where it happens: a compile that failed, a deploy or repair
-- run that finished with failed resources, an agent that has had no live
-- executor for longer than the environment's agent_timeout. One condition
-- is one notification: while a notification of a subject is unresolved,
-- the same condition again counts an occurrence on it instead of adding a
-- row (notifications_open); a compile that succeeds, a run without
-- failures, an executor for the agent resolve it. See docs/operations.md,
-- "Notifications".
create table notifications (
    id             uuid primary key default gen_random_uuid(),
    environment_id uuid not null references environments (id) on delete cascade,
    kind           text not null check (kind in ('compile_failed', 'run_failed', 'agent_without_executor')),
    severity       text not null check (severity in ('error', 'warning')),
    -- what it is about: compile_failed, run_failed, agent_without_executor/<agent>
    subject        text not null,
    title          text not null,
    message        text not null,
    -- the thing it links to (the newest occurrence's compile or run)
    compile_id     bigint,
    run            bigint,
    agent          text,
    occurrences    integer not null default 1,
    created_at     timestamptz not null default now(),
    last_seen_at   timestamptz not null default now(),
    resolved_at    timestamptz,
    read_at        timestamptz,
    cleared_at     timestamptz
);
create unique index notifications_open on notifications (environment_id, subject) where resolved_at is null;
create index notifications_environment on notifications (environment_id, created_at, id);

-- The notification webhook of an environment is a callback of its own
-- kind: the LSM callbacks' outbox, signer and dispatcher deliver it, and
-- the LSM routes and transfers ignore it. Its entity is '#notifications',
-- which no service entity can be called, so that a server of the previous
-- release (a rolling upgrade) sends it no transfer.
alter table lsm_callbacks add column kind text not null default 'lsm' check (kind in ('lsm', 'notifications'));
create unique index lsm_callbacks_notifications on lsm_callbacks (environment_id) where kind = 'notifications';

---- create above / drop below ----

delete from lsm_callbacks where kind = 'notifications';
drop index lsm_callbacks_notifications;
alter table lsm_callbacks drop column kind;
drop table notifications;
