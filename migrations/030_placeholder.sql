-- Placeholder for the lead's migration 030 (tern refuses gaps); replaced at merge.
select 1;

---- create above / drop below ----

select 1;
