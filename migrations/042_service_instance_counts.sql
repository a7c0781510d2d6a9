-- Each environment's count of live service instances, kept by a trigger
-- (issue 31): the create's service_instance_quota check reads one row
-- instead of counting up to the quota's rows, and it holds under
-- concurrent creates. The insert's trigger updates the environment's row,
-- so a second create in the same environment waits there until the first
-- commits and then counts it; the create checks the count after its insert
-- (store/lsm.go, checkInstanceQuota). Deletes only decrement (no insert):
-- an environment's delete cascades to this row and to its instances in no
-- fixed order, and an update of a row already gone does nothing.
create table service_instance_counts (
    environment_id uuid primary key references environments (id) on delete cascade,
    live           bigint not null default 0
);

create function service_instance_counts_keep() returns trigger language plpgsql as $$
declare
    d bigint := 0;
begin
    if tg_op = 'DELETE' then
        if not old.deleted then
            update service_instance_counts set live = live - 1 where environment_id = old.environment_id;
        end if;
        return null;
    end if;
    if tg_op = 'INSERT' then
        if not new.deleted then
            d := 1;
        end if;
    elsif old.deleted and not new.deleted then
        d := 1;
    elsif new.deleted and not old.deleted then
        d := -1;
    end if;
    if d <> 0 then
        insert into service_instance_counts as c (environment_id, live) values (new.environment_id, d)
            on conflict (environment_id) do update set live = c.live + excluded.live;
    end if;
    return null;
end $$;

create trigger service_instance_counts_insert after insert on service_instances
    for each row execute function service_instance_counts_keep();
create trigger service_instance_counts_update after update of deleted on service_instances
    for each row when (old.deleted is distinct from new.deleted) execute function service_instance_counts_keep();
create trigger service_instance_counts_delete after delete on service_instances
    for each row execute function service_instance_counts_keep();

-- After the triggers: creating them locks out writers of service_instances
-- until this migration commits, so the count misses no create in flight.
insert into service_instance_counts (environment_id, live)
    select environment_id, count(*) from service_instances where not deleted group by environment_id;

---- create above / drop below ----

drop trigger service_instance_counts_delete on service_instances;
drop trigger service_instance_counts_update on service_instances;
drop trigger service_instance_counts_insert on service_instances;
drop function service_instance_counts_keep();
drop table service_instance_counts;
