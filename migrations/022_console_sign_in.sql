-- The web console's sign-in, shared by every server replica: the key that
-- signs its forms' anti-forgery tokens and its OpenID Connect sign-in
-- cookie (so that a form or a sign-in begun on one replica is taken by
-- another), and the OIDC states already used (their SHA-256, until their
-- sign-in would have expired anyway), so that a callback is taken once.
-- See docs/security.md, "Browsers and sign-in".

create table console_keys (
    name       text primary key,
    key        bytea not null check (length(key) >= 32),
    created_at timestamptz not null default now()
);

create table console_oidc_states (
    hash       bytea primary key,
    expires_at timestamptz not null
);
create index console_oidc_states_expiry on console_oidc_states (expires_at);

---- create above / drop below ----

drop table console_oidc_states;
drop table console_keys;
