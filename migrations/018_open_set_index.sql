-- The open membership rows of one resource set: a service instance's
-- export replaces its set, and the lifecycle engine reads a set's content
-- and deploy state, each of which scanned every open row of the
-- environment (tens of thousands with thousands of live instances).
create index version_resources_open_set on version_resources (environment_id, resource_set)
    where last_version is null and resource_set is not null;

---- create above / drop below ----

drop index version_resources_open_set;
