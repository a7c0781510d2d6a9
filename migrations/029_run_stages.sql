-- Where a deploy run's batches spent their time (issue 28): per stage
-- (queued in the workflow, waiting for a poller, executing, recording) a
-- count, sum, max and fixed buckets, the most batches in flight at once and
-- the length of the run's workflow histories (runstages.Run), written when
-- the run finishes. Null: a run of before, or one that dispatched nothing.
alter table deploy_runs add column stages jsonb;

---- create above / drop below ----

alter table deploy_runs drop column stages;
