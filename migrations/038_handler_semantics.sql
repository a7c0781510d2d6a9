-- Handler semantics (issue 30).
--
-- An adapter may say "skipped, retry later" (adapters.Skipped): the
-- executor records the resource skipped with error class skipped, and the
-- run retries it like a throttled error. The action log keeps the class.
alter table resource_actions drop constraint resource_actions_error_class_check;
alter table resource_actions add constraint resource_actions_error_class_check
    check (error_class in ('permanent', 'transient', 'throttled', 'unavailable', 'skipped'));

-- unmanaged: true in the model: the resource is in the version (others may
-- require it) but intend never observes, changes or purges it. Part of the
-- intent, as the other flags are. Its executor records it unmanaged, which
-- counts as deployed for what requires it.
alter table resource_contents add column unmanaged boolean not null default false;
alter table resource_state drop constraint resource_state_last_result_check;
alter table resource_state add constraint resource_state_last_result_check
    check (last_result in ('new', 'deployed', 'failed', 'skipped', 'skipped_for_dependency',
                           'unavailable', 'undefined', 'skipped_for_undefined', 'unmanaged'));

-- A fact set by a user through the API (a parameter) is source user; one
-- an adapter discovered is source adapter and never overwrites a user's.
alter table facts add column source text not null default 'adapter'
    check (source in ('adapter', 'user'));
-- The number of user facts of an environment is bounded (a count at set).
create index facts_user on facts (environment_id) where source = 'user';

---- create above / drop below ----

drop index facts_user;
delete from facts where source = 'user';
alter table facts drop column source;
update resource_state set last_result = 'deployed' where last_result = 'unmanaged';
alter table resource_state drop constraint resource_state_last_result_check;
alter table resource_state add constraint resource_state_last_result_check
    check (last_result in ('new', 'deployed', 'failed', 'skipped', 'skipped_for_dependency',
                           'unavailable', 'undefined', 'skipped_for_undefined'));
alter table resource_contents drop column unmanaged;
update resource_actions set error_class = null where error_class = 'skipped';
alter table resource_actions drop constraint resource_actions_error_class_check;
alter table resource_actions add constraint resource_actions_error_class_check
    check (error_class in ('permanent', 'transient', 'throttled', 'unavailable'));
