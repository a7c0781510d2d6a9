-- Service instance metadata (issue 31): free key/values per instance
-- that no lifecycle reads. A metadata write updates this column alone,
-- with its own statement: it takes no transfer, so the instance's
-- version, state, sets and log stay as they are, and a transfer's write
-- (which sets the other columns) leaves it alone. Null: none.
alter table service_instances add column metadata jsonb
    check (metadata is null or jsonb_typeof(metadata) = 'object');

---- create above / drop below ----

alter table service_instances drop column metadata;
