-- Executor registrations are owned (docs/security.md, "Executors"): the
-- principal that registered a name in an environment is the only one
-- that updates it or marks it stopped (an admin may stop any). owner is
-- "token:<api_tokens.id>" for an API token, the principal's actor
-- otherwise ("system:intend" for the server's in-process embedded
-- executor); null for the rows of before this migration, which the next
-- report claims. No foreign key: the token of a registration may be
-- revoked, and then another token may take the name over.
alter table executors add column owner text;
-- The bound on the registrations of one owner in an environment counts
-- them at each new registration.
create index executors_owner on executors (environment_id, owner, last_seen);
-- The prune forgets rows not seen for a day, in every environment.
create index executors_last_seen on executors (last_seen);

---- create above / drop below ----

drop index executors_last_seen;
drop index executors_owner;
alter table executors drop column owner;
