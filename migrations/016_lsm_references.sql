-- Relations between service instances (issue 14, B.6): one row per
-- attribute of a live instance (the referrer) that names another
-- instance (the target) in its candidate, active or rollback set. The
-- lifecycle engine writes the rows in the transaction of the referrer's
-- transfer (store.ApplyInstanceChange) and drops them when the referrer
-- is terminated; a transfer that would delete or purge a target that has
-- rows is refused in its own transaction, under the target's row lock.
create table service_instance_references (
    environment_id uuid not null,
    referrer_id    uuid not null,
    attribute      text not null,
    target_id      uuid not null,
    primary key (environment_id, referrer_id, attribute, target_id),
    foreign key (environment_id, referrer_id) references service_instances (environment_id, id) on delete cascade,
    foreign key (environment_id, target_id) references service_instances (environment_id, id) on delete cascade
);
create index service_instance_references_target on service_instance_references (environment_id, target_id);

---- create above / drop below ----

drop table service_instance_references;
