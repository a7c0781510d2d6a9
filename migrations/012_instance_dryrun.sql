-- The resources of a dry-run that covers a proposed change rather than a
-- version: a service instance's dry-run (POST .../{id}/dryrun) renders the
-- instance's set from proposed attributes, stores the contents and lists
-- them here; the dry-run's plan reads these rows instead of the version's
-- membership. Rows go once their run has ended (PruneVersions).
create table dryrun_resources (
    environment_id uuid not null,
    run            bigint not null,
    resource_id    text not null,
    agent          text not null,
    hash           bytea not null,
    primary key (environment_id, run, resource_id),
    foreign key (environment_id, run) references deploy_runs (environment_id, run) on delete cascade,
    foreign key (environment_id, hash) references resource_contents (environment_id, hash)
);

---- create above / drop below ----

drop table dryrun_resources;
