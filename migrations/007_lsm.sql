-- The lifecycle service manager: the service catalog, the service inventory
-- and each instance's log. The lifecycle engine (one Temporal workflow per
-- instance) writes an instance's row, its log row and the first response
-- to an idempotent request in one transaction per transfer. See
-- docs/architecture.md, "The lifecycle service manager", and docs/lsm.md.

-- The catalog: the service entities of the environment's model.
create table service_entities (
    environment_id uuid not null references environments (id) on delete cascade,
    name           text not null,
    description    text not null default '',
    -- the attribute whose value identifies an instance (unique per entity), or null
    identity       text,
    -- [lsm.AttributeSpec]: name, modifier, description, default, schema, required
    attributes     jsonb not null,
    -- lsm.Lifecycle
    lifecycle      jsonb not null,
    -- the model source it was registered from
    model_hash     text not null,
    registered_at  timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    primary key (environment_id, name)
);

-- The inventory: one row per service instance, its current version.
create table service_instances (
    environment_id uuid not null,
    entity         text not null,
    id             uuid not null,
    -- the value of the entity's identity attribute, if it has one
    identity       text,
    state          text not null,
    version        bigint not null check (version >= 1),
    candidate_attributes jsonb,
    active_attributes    jsonb,
    rollback_attributes  jsonb,
    -- set with the terminal state: the instance is gone, its log stays
    deleted        boolean not null default false,
    created_at     timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    primary key (environment_id, id),
    foreign key (environment_id, entity) references service_entities (environment_id, name)
);
create index service_instances_entity on service_instances (environment_id, entity, state, id);
create unique index service_instances_identity on service_instances (environment_id, entity, identity)
    where identity is not null and not deleted;

-- The log: one row per instance version, written with the version.
create table service_instance_log (
    environment_id uuid not null,
    instance_id    uuid not null,
    version        bigint not null,
    state          text not null,
    candidate_attributes jsonb,
    active_attributes    jsonb,
    rollback_attributes  jsonb,
    -- what caused it: {"trigger", "source", "target", "error", "operations", "request"?}
    event          jsonb not null,
    -- the validation compile's errors, for a failed validation
    errors         jsonb,
    created_at     timestamptz not null default now(),
    primary key (environment_id, instance_id, version),
    foreign key (environment_id, instance_id) references service_instances (environment_id, id) on delete cascade
);

-- Idempotent requests: the first response to each Idempotency-Key, and
-- what the request was, so a repeat gets the same answer and a different
-- request under the same key is refused. Kept a day.
create table lsm_requests (
    environment_id uuid not null references environments (id) on delete cascade,
    key            text not null,
    request_hash   bytea not null,
    status         integer not null,
    response       jsonb not null,
    created_at     timestamptz not null default now(),
    primary key (environment_id, key)
);
create index lsm_requests_created on lsm_requests (created_at);

---- create above / drop below ----

drop table lsm_requests;
drop table service_instance_log;
drop table service_instances;
drop table service_entities;
