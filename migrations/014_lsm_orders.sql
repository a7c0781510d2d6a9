-- Orders of the lifecycle service manager: several creates, updates and
-- deletes of service instances sent together, items that depend on each
-- other, run by one Temporal workflow per order (intend.LSMOrder) under a
-- policy (all_or_nothing, best_effort). The workflow's activities write
-- every item's outcome and the order's status here as they happen, so
-- GET /lsm/v1/orders/{id} is current. See docs/architecture.md, "Orders".
create table lsm_orders (
    environment_id uuid not null references environments (id) on delete cascade,
    -- a version 7 UUID: ordering by id orders by submission time
    id             uuid not null,
    policy         text not null check (policy in ('all_or_nothing', 'best_effort')),
    -- pending, running, compensating, then one of succeeded, failed,
    -- partially_failed (best_effort), compensated (all_or_nothing)
    status         text not null,
    -- who asked (auth.Principal.Actor), kept in the instances' logs
    requested_by   text not null default '',
    item_count     integer not null check (item_count >= 1),
    created_at     timestamptz not null default now(),
    started_at     timestamptz,
    finished_at    timestamptz,
    primary key (environment_id, id)
);
-- the reconciler looks for orders whose workflow may have to be started
create index lsm_orders_unfinished on lsm_orders (status) where finished_at is null;

create table lsm_order_items (
    environment_id uuid not null,
    order_id       uuid not null,
    -- the item's index in the request
    position       integer not null,
    -- the client's id of the item, unique in the order
    item_id        text not null,
    operation      text not null check (operation in ('create', 'update', 'delete')),
    entity         text not null,
    -- the instance: a create's new id, or the one an update or delete names
    instance_id    uuid not null,
    -- the positions of the items it depends on
    depends_on     integer[] not null default '{}',
    -- the request as the client sent it: {"instance", "attributes", "edit", "depends_on"}
    spec           jsonb not null,
    -- pending, running, succeeded, failed, skipped, compensated, compensation_failed
    status         text not null default 'pending',
    -- the instance's version when the item was sent (what a compensation restores)
    version_before bigint,
    -- where the instance settled: its version and state
    version        bigint,
    state          text,
    error          text,
    started_at     timestamptz,
    finished_at    timestamptz,
    primary key (environment_id, order_id, position),
    unique (environment_id, order_id, item_id),
    foreign key (environment_id, order_id) references lsm_orders (environment_id, id) on delete cascade
);

---- create above / drop below ----

drop table lsm_order_items;
drop table lsm_orders;
