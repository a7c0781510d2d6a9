-- An executor records that an attempt is about to create, update or
-- delete a resource before its adapter does, a wave of resources at a
-- time; the outcome is recorded later, a chunk at a time. When the
-- attempt dies in between (kill -9), the next attempt of the batch finds
-- the change made (operation none) and records the change intended here
-- instead: 367 of 2,000 creates were logged as none before (issue 26).
-- The rows go with their batch, which goes when its run finishes.
create table resource_intents (
    environment_id uuid not null,
    run            bigint not null,
    seq            integer not null,
    workflow_id    text not null,
    resource_id    text not null,
    attempt        integer not null,
    operation      text not null check (operation in ('create', 'update', 'delete')),
    recorded_at    timestamptz not null default now(),
    primary key (environment_id, run, seq, workflow_id, resource_id, attempt),
    foreign key (environment_id, run, seq) references deploy_batches (environment_id, run, seq) on delete cascade
);

---- create above / drop below ----

drop table resource_intents;
