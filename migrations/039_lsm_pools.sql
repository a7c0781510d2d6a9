-- Allocation of r attributes from pools (issue 31, docs/lsm.md
-- "Allocation"): the model declares pools (a range of integers, of VLAN
-- ids, the subnets of a CIDR prefix); an r attribute declared
-- @lsm(r, allocate=<pool>) gets the lowest free value of its pool when an
-- instance is created, in the create's transaction, and gives it back
-- when the instance is terminated.

-- The environment's pools, as the catalog's model declares them (an
-- lsm.Pool as JSON). A create locks its pool's row: allocations from one
-- pool are serialised, across replicas.
create table lsm_pools (
    environment_id uuid not null references environments (id) on delete cascade,
    name           text not null,
    definition     jsonb not null,
    registered_at  timestamptz not null default now(),
    updated_at     timestamptz not null default now(),
    primary key (environment_id, name)
);

-- One row per value given to a live instance. ordinal is the value as a
-- number (an integer itself, a subnet its address): the lowest free
-- value is found from it. A value is never given twice: the primary key
-- and the unique value are the last guard behind the pool's lock.
create table lsm_allocations (
    environment_id uuid not null,
    pool           text not null,
    value          text not null,
    ordinal        numeric not null,
    instance_id    uuid not null,
    attribute      text not null,
    allocated_at   timestamptz not null default now(),
    primary key (environment_id, pool, ordinal),
    unique (environment_id, pool, value),
    unique (environment_id, instance_id, attribute),
    foreign key (environment_id, pool) references lsm_pools (environment_id, name),
    foreign key (environment_id, instance_id) references service_instances (environment_id, id) on delete cascade
);

-- A staged upload's pools, registered with its entities at its release.
alter table model_sources add column staged_pools jsonb;

---- create above / drop below ----

alter table model_sources drop column staged_pools;
drop table lsm_allocations;
drop table lsm_pools;
