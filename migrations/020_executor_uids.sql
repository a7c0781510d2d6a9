-- The user ids of the embedded executors (intend server --executor-uids):
-- each environment's executor runs as a user of its own, so that what one
-- environment's resources write (files 0600) is not another's to read.
-- A slot is never given to another environment, not even after its
-- environment is deleted (no foreign key): the files its user left behind
-- stay that user's. uid = the range's first + slot.
create table executor_uids (
    environment_id uuid primary key,
    slot           integer generated always as identity (minvalue 0 start with 0)
);

---- create above / drop below ----

drop table executor_uids;
