-- A caller's refused requests (any 4xx its request was answered with) are
-- written to the audit trail once a window (a minute) per actor, action,
-- status and environment; the refusals after that row are counted here and
-- written as one summary row when the window closes. The windows live in
-- PostgreSQL so that the server's replicas share them: one read token
-- wrote 1,000 rows in 33 s before (docs/security.md, "Limits per client").

create table audit_refusal_windows (
    actor           text not null,
    action          text not null,
    status          integer not null,
    -- the environment's id, '' when the refusal named none
    environment_key text not null,
    -- when the window's row was written ('-infinity': not yet)
    opened_at       timestamptz not null,
    -- the refusals counted since, the first's and the last's time
    suppressed      integer not null default 0,
    first_at        timestamptz,
    last_at         timestamptz,
    -- the rest of the summary row, from the last refusal counted
    environment_id  uuid,
    environment     text,
    actor_kind      text not null,
    remote_addr     text not null default '',
    method          text not null default '',
    path            text not null default '',
    primary key (actor, action, status, environment_key)
);

create index audit_refusal_windows_opened on audit_refusal_windows (opened_at);

---- create above / drop below ----

drop table audit_refusal_windows;
