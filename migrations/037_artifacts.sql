-- Adapter plugins' artifacts (issue 30): the executables and zipapps a
-- version's plugins run, stored per environment and addressed by their
-- SHA-256, in chunks of 1 MiB so that an upload and a download stream
-- (the server holds a chunk at a time, never the whole artifact). An
-- upload writes its rows in one transaction and marks the artifact
-- complete when its digest matched; deleting the environment deletes
-- them. A version records the plugins it requires.
create table artifacts (
    environment_id uuid not null references environments (id) on delete cascade,
    digest         text not null check (digest ~ '^sha256:[0-9a-f]{64}$'),
    size           bigint not null check (size >= 0),
    uploaded_by    text,
    uploaded_at    timestamptz not null default now(),
    complete       boolean not null default false,
    primary key (environment_id, digest)
);

create table artifact_chunks (
    environment_id uuid not null,
    digest         text not null,
    seq            int not null check (seq >= 0),
    data           bytea not null,
    primary key (environment_id, digest, seq),
    foreign key (environment_id, digest) references artifacts (environment_id, digest) on delete cascade
);

-- The version's []ledger.Plugin; null: none.
alter table versions add column plugins jsonb;

---- create above / drop below ----

alter table versions drop column plugins;
drop table artifact_chunks;
drop table artifacts;
