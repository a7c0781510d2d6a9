-- The batch (its seq in the deploy run) an action was recorded for, so that
-- a retried batch resumes after exactly what it recorded, whatever
-- Temporal last heard of it (a heartbeat lost in an outage), and a batch
-- given up on marks only what it did not record. Null for the plan's own
-- records and for rows of before this migration.
alter table resource_actions add column batch integer;

---- create above / drop below ----

alter table resource_actions drop column batch;
