-- A dry-run's results are read a page at a time in resource id order
-- (GET .../dryrun/{id}, DryrunResults), and polled for its progress with a
-- page of one. Its unchanged attempts sit in unchanged_actions, up to a
-- block's worth per row in the order they were recorded, so a page had to
-- expand and sort every attempt of the run: at 100,000 resources 150–300
-- ms a page, for a page of one as for a page of 1,000, and a dry-run
-- polled every few milliseconds spent a core of PostgreSQL on it (issue
-- 28). Each row now carries its least and greatest resource id: a page
-- expands only the rows whose range reaches into it; and its count of
-- attempts, which a page adds up over the rows of the run (counting the
-- array read each row's out of TOAST: 30 ms a poll at 100,000).
--
-- Generated columns: every writer (COPY with a column list, the
-- retention's update of the arrays) keeps them right without knowing of
-- them, the previous release's included, and they compare in the
-- database's collation as the page's order does.
create function unchanged_least(ids text[]) returns text language sql immutable strict parallel safe
    as $$ select min(x) from unnest(ids) as x $$;
create function unchanged_greatest(ids text[]) returns text language sql immutable strict parallel safe
    as $$ select max(x) from unnest(ids) as x $$;
alter table unchanged_actions
    add column least_resource_id text generated always as (unchanged_least(resource_ids)) stored,
    add column greatest_resource_id text generated always as (unchanged_greatest(resource_ids)) stored,
    add column members integer generated always as (cardinality(resource_ids)) stored;

---- create above / drop below ----

alter table unchanged_actions drop column least_resource_id, drop column greatest_resource_id, drop column members;
drop function unchanged_least(text[]);
drop function unchanged_greatest(text[]);
