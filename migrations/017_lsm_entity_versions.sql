-- Service entity versions (issue 14, B.5): the catalog keeps every version
-- of an entity that the model keeps (the newest and its previous ones);
-- service_entities holds the newest's definition, as before, and its
-- number. Each attribute set of an instance is of one version of its
-- entity; the versions move with the sets (a promote, a rollback), so a
-- migration is an update whose candidate set is of a newer version. See
-- docs/lsm.md, "Entity versions", and docs/architecture.md.
create table service_entity_versions (
    environment_id uuid not null,
    entity         text not null,
    version        integer not null check (version >= 1),
    description    text not null default '',
    identity       text,
    attributes     jsonb not null,
    lifecycle      jsonb not null,
    model_hash     text not null,
    registered_at  timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    primary key (environment_id, entity, version),
    foreign key (environment_id, entity) references service_entities (environment_id, name) on delete cascade
);
insert into service_entity_versions (environment_id, entity, version, description, identity, attributes,
    lifecycle, model_hash, registered_at, updated_at)
select environment_id, name, 1, description, identity, attributes, lifecycle, model_hash, registered_at, updated_at
from service_entities;

alter table service_entities add column version integer not null default 1;

-- null with an empty set; 1 for the sets of before versions.
alter table service_instances add column candidate_version integer,
    add column active_version integer, add column rollback_version integer;
update service_instances set candidate_version = case when candidate_attributes is not null then 1 end,
    active_version = case when active_attributes is not null then 1 end,
    rollback_version = case when rollback_attributes is not null then 1 end;
alter table service_instance_log add column candidate_version integer,
    add column active_version integer, add column rollback_version integer;

-- A bulk migration is an order of migrate items (one per instance).
alter table lsm_order_items drop constraint lsm_order_items_operation_check;
alter table lsm_order_items add constraint lsm_order_items_operation_check
    check (operation in ('create', 'update', 'delete', 'migrate'));

---- create above / drop below ----

delete from lsm_orders o where exists (select 1 from lsm_order_items i
    where i.environment_id = o.environment_id and i.order_id = o.id and i.operation = 'migrate');
alter table lsm_order_items drop constraint lsm_order_items_operation_check;
alter table lsm_order_items add constraint lsm_order_items_operation_check
    check (operation in ('create', 'update', 'delete'));

alter table service_instance_log drop column candidate_version, drop column active_version,
    drop column rollback_version;
alter table service_instances drop column candidate_version, drop column active_version,
    drop column rollback_version;
alter table service_entities drop column version;
drop table service_entity_versions;
