-- Model sources: the project (intend.yaml and its CUE module) that an
-- environment's model was compiled from, as the gzipped tar that
-- project.Archive makes. The server compiles service instances from the
-- newest one itself, whichever usage mode exported the model (the CLI
-- uploads it with each export; an autonomous compile stores its checkout).
-- See docs/architecture.md, "The lifecycle service manager".
create table model_sources (
    environment_id uuid not null references environments (id) on delete cascade,
    -- SHA-256 of the archive, hex
    hash           text not null,
    archive        bytea not null,
    files          integer not null,
    size           integer not null,
    -- where it came from: cli (intend export), compile (autonomous)
    origin         text not null check (origin in ('cli', 'compile')),
    uploaded_at    timestamptz not null default now(),
    primary key (environment_id, hash)
);
create index model_sources_newest on model_sources (environment_id, uploaded_at desc);

---- create above / drop below ----

drop table model_sources;
