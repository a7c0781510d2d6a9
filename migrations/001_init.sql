-- intend's first schema: projects, environments, desired-state versions with
-- content-addressed resources, per-resource deploy state, deploy runs and their
-- batches, and the resource action log. See docs/architecture.md, "Data model".

create table projects (
    id         uuid primary key default gen_random_uuid(),
    name       text not null unique,
    created_at timestamptz not null default now()
);

create table environments (
    id               uuid primary key default gen_random_uuid(),
    project_id       uuid not null references projects (id) on delete restrict,
    -- name is unique and immutable: it is part of workflow ids and task queues.
    name             text not null unique,
    description      text not null default '',
    -- settings holds only keys the server knows (validated in Go); absent
    -- keys take their documented default.
    settings         jsonb not null default '{}'::jsonb,
    halted           boolean not null default false,
    -- last_version is the newest exported version; released_version the one
    -- the orchestrator enforces (null before the first release).
    last_version     bigint not null default 0,
    released_version bigint,
    last_deploy_run  bigint not null default 0,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now()
);
create index environments_project on environments (project_id);

create table versions (
    environment_id uuid not null references environments (id) on delete cascade,
    version        bigint not null,
    created_at     timestamptz not null default now(),
    released_at    timestamptz,
    resource_count integer not null,
    -- resources added, changed or removed against the previous version
    changed_count  integer not null,
    primary key (environment_id, version)
);

-- One row per distinct resource intent (id + attributes + requires + flags),
-- keyed by its sha256. Versions reference contents; unchanged resources are
-- never copied.
create table resource_contents (
    environment_id uuid not null references environments (id) on delete cascade,
    hash           bytea not null,
    resource_id    text not null,
    attributes     jsonb not null,
    requires       text[] not null default '{}',
    purged         boolean not null default false,
    send_event     boolean not null default false,
    receive_events boolean not null default false,
    report_only    boolean not null default false,
    -- The resource set (part of the intent hash); null: the shared set.
    resource_set   text,
    primary key (environment_id, hash)
);

-- Version membership as intervals: resource_id has content hash in every
-- version v with first_version <= v < last_version (last_version null: up to
-- the newest version). A new version writes rows only for what changed.
create table version_resources (
    environment_id uuid not null references environments (id) on delete cascade,
    resource_id    text not null,
    first_version  bigint not null,
    last_version   bigint,
    hash           bytea not null,
    resource_type  text not null,
    agent          text not null,
    -- Copied from the content, so that a partial export finds the open
    -- rows of a set without joining contents; null: the shared set.
    resource_set   text,
    primary key (environment_id, resource_id, first_version),
    foreign key (environment_id, hash) references resource_contents (environment_id, hash),
    check (last_version is null or last_version > first_version)
);
create index version_resources_open on version_resources (environment_id, resource_id) where last_version is null;
create index version_resources_first on version_resources (environment_id, first_version);
create index version_resources_last on version_resources (environment_id, last_version) where last_version is not null;
-- Pruning deletes contents nothing references; the foreign-key check of each
-- deleted content looks membership up by hash.
create index version_resources_hash on version_resources (environment_id, hash);

-- Deploy state of every resource the environment has released (orphans keep
-- their row with intent_hash null).
create table resource_state (
    environment_id       uuid not null references environments (id) on delete cascade,
    resource_id          text not null,
    resource_type        text not null,
    agent                text not null,
    intent_hash          bytea,
    intent_version       bigint,
    deployed_hash        bytea,
    last_result          text not null default 'new'
        check (last_result in ('new', 'deployed', 'failed', 'skipped', 'skipped_for_dependency',
                               'unavailable', 'undefined', 'skipped_for_undefined')),
    compliance           text not null default 'has_update'
        check (compliance in ('compliant', 'has_update', 'non_compliant', 'undefined')),
    blocked              boolean not null default false,
    last_attempt         timestamptz,
    last_success         timestamptz,
    last_produced_change boolean not null default false,
    primary key (environment_id, resource_id)
);
create index resource_state_agent on resource_state (environment_id, agent, resource_id);
create index resource_state_pending on resource_state (environment_id, agent, resource_id)
    where intent_hash is not null and compliance <> 'compliant';
-- Recording a deployed resource looks for what was skipped because of it.
create index resource_state_skipped on resource_state (environment_id)
    where last_result = 'skipped_for_dependency';

-- Agents seen in released versions, per environment: the embedded executor
-- serves them (setting autostart_agents) without scanning resource_state.
create table agents (
    environment_id uuid not null references environments (id) on delete cascade,
    name           text not null,
    paused         boolean not null default false,
    first_seen     timestamptz not null default now(),
    primary key (environment_id, name)
);

-- The scheduler's queue: what users, releases and timers asked for. The
-- scheduler takes every queued request of an environment at once into one
-- deploy run (merging them); a preempted run puts its requests back.
create table deploy_requests (
    environment_id uuid not null references environments (id) on delete cascade,
    id             bigint generated always as identity,
    kind           text not null check (kind in ('deploy', 'repair', 'dryrun')),
    reason         text not null,
    -- null: every agent / every resource
    agents         text[],
    resource_ids   text[],
    -- repair: only resources not attempted since then (null: all)
    stale_before   timestamptz,
    requested_at   timestamptz not null default now(),
    -- made by intend itself (timers, recovered dependencies, events): taken
    -- only when it has anything to do
    auto           boolean not null default false,
    -- the run that took it (0: nothing to do); null while queued
    run            bigint,
    primary key (environment_id, id)
);
create index deploy_requests_queued on deploy_requests (environment_id) where run is null;
create index deploy_requests_run on deploy_requests (environment_id, run);

-- A deploy run is one deploy workflow: env/<env>/deploy/<run>.
create table deploy_runs (
    environment_id uuid not null references environments (id) on delete cascade,
    run            bigint not null,
    version        bigint not null,
    action         text not null check (action in ('deploy', 'repair', 'dryrun')),
    reason         text not null,
    status         text not null default 'pending'
        check (status in ('pending', 'running', 'done', 'failed', 'preempted')),
    -- the scheduler's idempotency key for creating this run
    token          text unique,
    requested_at   timestamptz not null default now(),
    started_at     timestamptz,
    finished_at    timestamptz,
    total          integer not null default 0,
    deployed       integer not null default 0,
    failed         integer not null default 0,
    skipped        integer not null default 0,
    unavailable    integer not null default 0,
    workflow_id    text not null,
    primary key (environment_id, run)
);
create index deploy_runs_open on deploy_runs (environment_id, run) where status in ('pending', 'running');
create index deploy_runs_workflow on deploy_runs (environment_id, workflow_id);

-- The batches a run dispatches: resources of one agent, bounded in count and
-- bytes. Executors read their batch here, so workflow histories carry only
-- (run, seq).
create table deploy_batches (
    environment_id uuid not null,
    run            bigint not null,
    seq            integer not null,
    agent          text not null,
    level          integer not null,
    resource_ids   text[] not null,
    hashes         bytea[] not null,
    primary key (environment_id, run, seq),
    foreign key (environment_id, run) references deploy_runs (environment_id, run) on delete cascade
);

-- The action log: one row per attempt on one resource.
create table resource_actions (
    id             bigint generated always as identity primary key,
    environment_id uuid not null references environments (id) on delete cascade,
    resource_id    text not null,
    version        bigint not null,
    action         text not null check (action in ('deploy', 'repair', 'dryrun')),
    reason         text not null,
    started_at     timestamptz not null,
    finished_at    timestamptz not null,
    result         text not null,
    -- what the adapter did (or, in a dry-run, would do): none, create,
    -- update or delete; null when it never got that far
    operation      text,
    changes        jsonb,
    logs           jsonb,
    error          text,
    workflow_id    text not null,
    run_id         text not null,
    attempt        integer not null
);
create index resource_actions_resource on resource_actions (environment_id, resource_id, id desc);
create index resource_actions_env on resource_actions (environment_id, id desc);
create index resource_actions_workflow on resource_actions (workflow_id, resource_id);

-- Facts: values adapters discovered on the target, per resource; the last
-- observation of each name wins. They outlive the resource's intent (an
-- orphan keeps its facts) and go with the environment.
create table facts (
    environment_id uuid not null references environments (id) on delete cascade,
    resource_id    text not null,
    name           text not null,
    value          jsonb not null,
    updated_at     timestamptz not null default now(),
    primary key (environment_id, resource_id, name)
);

---- create above / drop below ----

drop table facts;
drop table resource_actions;
drop table deploy_batches;
drop table deploy_runs;
drop table deploy_requests;
drop table agents;
drop table resource_state;
drop table version_resources;
drop table resource_contents;
drop table versions;
drop table environments;
drop table projects;
