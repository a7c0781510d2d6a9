-- Undefined resources: a resource whose attributes depend on a value not
-- known yet (a fact no adapter has reported) is exported "undefined". It is
-- never deployed, and what requires it is skipped (skipped_for_undefined)
-- until a version defines it. See docs/api.md, "Undefined resources".

-- Part of the intent, as the other flags are: an undefined resource and its
-- defined form have different hashes, so different contents.
alter table resource_contents add column undefined boolean not null default false;

-- Recording a deployed resource looks for what was skipped because of it:
-- a dependency that failed or one that was undefined.
drop index resource_state_skipped;
create index resource_state_skipped on resource_state (environment_id)
    where last_result in ('skipped_for_dependency', 'skipped_for_undefined');

---- create above / drop below ----

drop index resource_state_skipped;
create index resource_state_skipped on resource_state (environment_id)
    where last_result = 'skipped_for_dependency';
alter table resource_contents drop column undefined;
