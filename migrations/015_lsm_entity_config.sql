-- A service entity's configuration (issue 14, B.7): what operators set per
-- entity, apart from what the model defines, so that a model export
-- (which rewrites the entity's other columns) leaves it as it is.
-- {"auto_transfers": false} stops the lifecycle engine from taking the
-- entity's auto transfers; absent keys take their defaults.
alter table service_entities add column config jsonb not null default '{}'::jsonb;

---- create above / drop below ----

alter table service_entities drop column config;
