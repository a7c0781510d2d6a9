-- The per-resource tables check their environment once per statement, not
-- once per row (issue 28). A foreign key on environment_id ran a query
-- locking the environment's row for each row inserted: 67,000 of them
-- over intend-bench's P1–P5 at 10,000 resources, every chunk of records,
-- every export. The guarantee stays what the foreign key gave (see
-- docs/architecture.md, "Environment rows without foreign keys"):
--
-- - an insert (COPY included) takes a key share lock on the environments
--   of its rows, as the foreign key did, in one statement after it, and
--   fails with foreign_key_violation (23503) when one does not exist: a
--   deleted environment gets no rows, and one cannot be deleted while a
--   transaction that wrote rows of it is open;
-- - environment_id of a row never changes (an update that sets it fails;
--   an after trigger: a row trigger before update would lock each row
--   that any update touches first, a WAL record more for each);
-- - deleting an environment deletes its rows (a trigger, as the
--   cascade did; DeleteEnvironment clears them first anyway).
-- version_resources before resource_contents: its rows reference them.
create function environment_rows_check() returns trigger language plpgsql as $$
declare
    envs uuid[];
    found integer;
begin
    select array_agg(distinct environment_id) into envs from new_rows;
    if envs is null then
        return null;
    end if;
    perform 1 from environments where id = any(envs) for key share;
    get diagnostics found = row_count;
    if found < cardinality(envs) then
        raise foreign_key_violation using
            message = format('insert into %I: no environment of id %s', tg_table_name,
                (select string_agg(e::text, ', ') from unnest(envs) as e
                 where not exists (select 1 from environments where id = e)));
    end if;
    return null;
end $$;

create function environment_rows_fixed() returns trigger language plpgsql as $$
begin
    if new.environment_id is distinct from old.environment_id then
        raise foreign_key_violation using message = format('%I: environment_id of a row does not change', tg_table_name);
    end if;
    return null;
end $$;

create function environment_rows_delete() returns trigger language plpgsql as $$
begin
    delete from resource_actions where environment_id = old.id;
    delete from unchanged_actions where environment_id = old.id;
    delete from facts where environment_id = old.id;
    delete from resource_state where environment_id = old.id;
    delete from version_resources where environment_id = old.id;
    delete from resource_contents where environment_id = old.id;
    return null;
end $$;

alter table resource_actions drop constraint resource_actions_environment_id_fkey;
create trigger environment_rows_check after insert on resource_actions
    referencing new table as new_rows for each statement execute function environment_rows_check();
create trigger environment_rows_fixed after update of environment_id on resource_actions
    for each row execute function environment_rows_fixed();

alter table unchanged_actions drop constraint unchanged_actions_environment_id_fkey;
create trigger environment_rows_check after insert on unchanged_actions
    referencing new table as new_rows for each statement execute function environment_rows_check();
create trigger environment_rows_fixed after update of environment_id on unchanged_actions
    for each row execute function environment_rows_fixed();

alter table facts drop constraint facts_environment_id_fkey;
create trigger environment_rows_check after insert on facts
    referencing new table as new_rows for each statement execute function environment_rows_check();
create trigger environment_rows_fixed after update of environment_id on facts
    for each row execute function environment_rows_fixed();

alter table resource_state drop constraint resource_state_environment_id_fkey;
create trigger environment_rows_check after insert on resource_state
    referencing new table as new_rows for each statement execute function environment_rows_check();
create trigger environment_rows_fixed after update of environment_id on resource_state
    for each row execute function environment_rows_fixed();

alter table version_resources drop constraint version_resources_environment_id_fkey;
create trigger environment_rows_check after insert on version_resources
    referencing new table as new_rows for each statement execute function environment_rows_check();
create trigger environment_rows_fixed after update of environment_id on version_resources
    for each row execute function environment_rows_fixed();

alter table resource_contents drop constraint resource_contents_environment_id_fkey;
create trigger environment_rows_check after insert on resource_contents
    referencing new table as new_rows for each statement execute function environment_rows_check();
create trigger environment_rows_fixed after update of environment_id on resource_contents
    for each row execute function environment_rows_fixed();

create trigger environment_rows_delete after delete on environments
    for each row execute function environment_rows_delete();

-- Also (issue 28): every chunk of records with a change asks which of
-- the changed resources send events (actions.go, sendersSQL), a probe of
-- resource_contents and its row per resource; the contents that send
-- events are few, and this index holds them alone.
create index resource_contents_send_event on resource_contents (environment_id, hash) where send_event;

---- create above / drop below ----

drop index resource_contents_send_event;

drop trigger environment_rows_delete on environments;

drop trigger environment_rows_check on resource_contents;
drop trigger environment_rows_fixed on resource_contents;
alter table resource_contents add constraint resource_contents_environment_id_fkey
    foreign key (environment_id) references environments (id) on delete cascade;

drop trigger environment_rows_check on version_resources;
drop trigger environment_rows_fixed on version_resources;
alter table version_resources add constraint version_resources_environment_id_fkey
    foreign key (environment_id) references environments (id) on delete cascade;

drop trigger environment_rows_check on resource_state;
drop trigger environment_rows_fixed on resource_state;
alter table resource_state add constraint resource_state_environment_id_fkey
    foreign key (environment_id) references environments (id) on delete cascade;

drop trigger environment_rows_check on facts;
drop trigger environment_rows_fixed on facts;
alter table facts add constraint facts_environment_id_fkey
    foreign key (environment_id) references environments (id) on delete cascade;

drop trigger environment_rows_check on unchanged_actions;
drop trigger environment_rows_fixed on unchanged_actions;
alter table unchanged_actions add constraint unchanged_actions_environment_id_fkey
    foreign key (environment_id) references environments (id) on delete cascade;

drop trigger environment_rows_check on resource_actions;
drop trigger environment_rows_fixed on resource_actions;
alter table resource_actions add constraint resource_actions_environment_id_fkey
    foreign key (environment_id) references environments (id) on delete cascade;

drop function environment_rows_delete();
drop function environment_rows_fixed();
drop function environment_rows_check();
