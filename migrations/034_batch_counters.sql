-- A running run's live counters move per batch, not on the run's row
-- (issue 28): every chunk of records of every batch in flight updated the
-- run's row, so the chunks of a run's batches waited for each other's
-- commits (the top statement by time over intend-bench's P1–P5: 1.1–2.1 s
-- of lock waits in 311 calls). A batch's chunks are recorded one after
-- another, so its row is never waited for. A running run's counters are
-- its row's (the plan's own records) plus its batches' sums; FinishRun
-- sets the exact totals and drops the batches.
alter table deploy_batches
    add column deployed    integer not null default 0,
    add column failed      integer not null default 0,
    add column skipped     integer not null default 0,
    add column unavailable integer not null default 0;

---- create above / drop below ----

alter table deploy_batches drop column deployed, drop column failed, drop column skipped, drop column unavailable;
