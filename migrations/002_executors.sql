-- Executors report themselves: which agents of which environment each
-- serves, from which host and process, and when it was last seen; and the
-- action log names the executor that ran each attempt. See
-- docs/architecture.md, "Executor registration".

-- One row per executor and environment, upserted by the executor at start
-- and every heartbeat (about 10 s); last_seen and started_at are the
-- database's clock, so executors' clocks do not matter. A clean shutdown
-- sets stopped_at; a killed executor just stops being seen.
create table executors (
    environment_id uuid not null references environments (id) on delete cascade,
    -- unique per environment: --name, by default <hostname>-<pid>
    name           text not null,
    hostname       text not null,
    pid            integer not null,
    version        text not null,
    agents         text[] not null,
    -- the embedded executor of an intend server
    embedded       boolean not null default false,
    started_at     timestamptz not null default now(),
    last_seen      timestamptz not null default now(),
    stopped_at     timestamptz,
    primary key (environment_id, name)
);
-- The executor that ran the attempt; null for records no executor made
-- (unavailable, given up) and for records older than this migration.
alter table resource_actions add column executor text;

---- create above / drop below ----

alter table resource_actions drop column executor;
drop table executors;
