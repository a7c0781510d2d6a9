-- placeholder: replaced by 016 of the relations branch at merge
-- (tern refuses a step without SQL, and a migration without a down step
-- cannot be rolled back: no-ops keep the numbering without gaps)
select 1;

---- create above / drop below ----

select 1;
