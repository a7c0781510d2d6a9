-- Authentication and the audit trail. API tokens are random secrets shown
-- once; only their SHA-256 is kept. Every write to the API, and every
-- refused one, leaves an audit row naming who (a token's name, an OIDC
-- subject, or intend itself) did what from where. See docs/security.md.

create table api_tokens (
    id           uuid primary key default gen_random_uuid(),
    name         text not null,
    -- read, operator, author, admin or executor
    role         text not null check (role in ('read', 'operator', 'author', 'admin', 'executor')),
    -- null: every environment; else the ids of the environments it reaches
    environments uuid[],
    -- executor tokens: the agents it serves (null: every agent)
    agents       text[],
    -- sha256 of the whole secret
    hash         bytea not null unique,
    -- the first characters of the secret, to tell tokens apart in lists
    hint         text not null,
    created_by   text not null,
    created_at   timestamptz not null default now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
create unique index api_tokens_live_name on api_tokens (name) where revoked_at is null;

create table audit_log (
    id             bigint generated always as identity primary key,
    at             timestamptz not null default now(),
    -- no foreign key: the trail of a deleted environment stays
    environment_id uuid,
    environment    text,
    -- token, oidc, system or anonymous
    actor_kind     text not null,
    actor          text not null,
    remote_addr    text not null default '',
    -- what was done: "version.export", "token.create", …
    action         text not null,
    method         text not null default '',
    path           text not null default '',
    status         integer not null,
    detail         jsonb
);
create index audit_log_env on audit_log (environment_id, id desc);
create index audit_log_id on audit_log (id desc);

alter table versions add column exported_by text;
alter table versions add column released_by text;
alter table deploy_requests add column requested_by text;

---- create above / drop below ----

alter table deploy_requests drop column requested_by;
alter table versions drop column released_by;
alter table versions drop column exported_by;
drop table audit_log;
drop table api_tokens;
