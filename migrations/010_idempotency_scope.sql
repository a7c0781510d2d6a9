-- An Idempotency-Key is scoped to the endpoint it was used on (the method
-- and path, which name the entity and the instance): the same key sent to
-- another endpoint is another request, not a reuse. Rows of before this
-- migration get the empty scope; they expire within a day.
alter table lsm_requests add column scope text not null default '';
alter table lsm_requests drop constraint lsm_requests_pkey;
alter table lsm_requests add primary key (environment_id, scope, key);

---- create above / drop below ----

delete from lsm_requests where scope <> '';
alter table lsm_requests drop constraint lsm_requests_pkey;
alter table lsm_requests add primary key (environment_id, key);
alter table lsm_requests drop column scope;
