-- LSM callbacks: a client registers a URL per environment (or per service
-- entity); every transfer of a matching service instance is written, in
-- the transfer's own transaction, as one outbox row per callback
-- (lsm_callback_events), which the dispatchers of intend server deliver
-- as signed JSON, at least once, in version order per (callback,
-- instance). See docs/architecture.md, "Callbacks", and docs/lsm.md.

create table lsm_callbacks (
    id             uuid primary key default gen_random_uuid(),
    environment_id uuid not null references environments (id) on delete cascade,
    -- the service entity whose instances it hears of; null: every entity
    -- (no foreign key: an entity the model drops and brings back keeps
    -- its callbacks)
    entity         text,
    url            text not null,
    description    text not null default '',
    -- the HMAC key of the signatures, shown once at registration; the
    -- dispatcher needs it in clear to sign
    secret         text not null,
    created_by     text not null,
    created_at     timestamptz not null default now()
);
create index lsm_callbacks_environment on lsm_callbacks (environment_id, entity);

-- The outbox: one row per (callback, transfer), written with the transfer.
create table lsm_callback_events (
    callback_id     uuid not null references lsm_callbacks (id) on delete cascade,
    instance_id     uuid not null,
    version         bigint not null,
    -- the transfer's id: the same for every callback and every attempt
    event_id        uuid not null,
    -- the JSON body sent, built when the transfer was written
    payload         jsonb not null,
    -- pending (to deliver, or being delivered), delivered or dead (given up)
    status          text not null default 'pending' check (status in ('pending', 'delivered', 'dead')),
    attempts        integer not null default 0,
    next_attempt_at timestamptz not null default now(),
    -- a dispatcher's claim: who (token) and until when
    lease_token     uuid,
    lease_until     timestamptz,
    last_attempt_at timestamptz,
    -- the last attempt's HTTP status (null: no answer) and error
    last_status     integer,
    last_error      text,
    created_at      timestamptz not null default now(),
    -- when it was delivered or given up on
    done_at         timestamptz,
    primary key (callback_id, instance_id, version)
);
create index lsm_callback_events_due on lsm_callback_events (next_attempt_at) where status = 'pending';
create index lsm_callback_events_done on lsm_callback_events (done_at) where status <> 'pending';

---- create above / drop below ----

drop table lsm_callback_events;
drop table lsm_callbacks;
