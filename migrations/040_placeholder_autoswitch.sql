-- PLACEHOLDER of wt-autoswitch: migration 040 belongs to another helper's branch
-- (tern refuses a gap before 041). Drop this file when merging.
select 1;

---- create above / drop below ----

select 1;
