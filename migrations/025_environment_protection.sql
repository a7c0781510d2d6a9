-- Housekeeping of environments (docs/operations.md, "Clearing,
-- decommissioning and protecting an environment"): a protected
-- environment refuses clear, decommission and delete until a global admin
-- lifts the protection; decommission_version is the version a
-- decommission released to purge everything, null when none is under way
-- (while set, the environment takes no other version).
alter table environments
    add column protected boolean not null default false,
    add column decommission_version bigint;

---- create above / drop below ----

alter table environments drop column protected, drop column decommission_version;
