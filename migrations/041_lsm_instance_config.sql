-- A service instance's own config (issue 31, Inmanta's config_name): what
-- an operator sets for one instance over its entity's config, kept apart
-- from the instance's row (which every transfer rewrites). A row exists
-- only for an instance whose config was set; it goes with the instance.
-- {"auto_transfers": false} holds every auto transfer of the instance,
-- {"auto_transfer_configs": {"name": bool}} switches the auto transfers
-- of that config name, over the entity's entry for the name.
create table service_instance_configs (
    environment_id uuid not null,
    instance_id    uuid not null,
    config         jsonb not null,
    updated_at     timestamptz not null default now(),
    primary key (environment_id, instance_id),
    foreign key (environment_id, instance_id) references service_instances (environment_id, id) on delete cascade
);

---- create above / drop below ----

drop table service_instance_configs;
