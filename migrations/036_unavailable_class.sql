-- An adapter that cannot reach its target (an API server that refuses
-- connections, a network device that went away) classes its error
-- unavailable (issue 29): the executor records the resource unavailable,
-- not failed, and the run retries it like a transient error. The action
-- log keeps that class beside the others.
alter table resource_actions drop constraint resource_actions_error_class_check;
alter table resource_actions add constraint resource_actions_error_class_check
    check (error_class in ('permanent', 'transient', 'throttled', 'unavailable'));

---- create above / drop below ----

update resource_actions set error_class = 'transient' where error_class = 'unavailable';
alter table resource_actions drop constraint resource_actions_error_class_check;
alter table resource_actions add constraint resource_actions_error_class_check
    check (error_class in ('permanent', 'transient', 'throttled'));
