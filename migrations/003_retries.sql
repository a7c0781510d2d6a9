-- Retries within a deploy run: the action log keeps the class of an
-- adapter's error, and a run's retry batches are told apart from its plan.
-- See docs/architecture.md, "Retries".

-- permanent, transient or throttled when result is failed; null otherwise
-- and for records older than this migration.
alter table resource_actions add column error_class text
    check (error_class in ('permanent', 'transient', 'throttled'));
-- 0 for the batches of the plan; n for the batches of the n-th retry of
-- a level.
alter table deploy_batches add column retry integer not null default 0;

---- create above / drop below ----

alter table deploy_batches drop column retry;
alter table resource_actions drop column error_class;
