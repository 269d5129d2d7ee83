-- Flight Recorder: which process group each dump entry belongs to, and who its members are.
-- A group is its name (process_group[0], the PG GUID every member shares) and its GLOBAL ranks
-- (pg_config; split_group can give groups of different ranks one name). pg_id is process-local
-- (each rank counts only the groups it is a member of), so it names no group across ranks.
-- No dump is a reference: every rank's own pg_config speaks for the groups it is in.

-- One dump per rank: a rank dumped twice (a pickle and a JSON of one buffer, two dumps over time)
-- counts once, its newest (highest record_id), then the one with most entries, then by name.
create or replace temp table fr_dump_of_rank as
select d.rank, arg_min(d.file, (-coalesce(e.last_record, -1), -d.entries, d.file)) as file,
       bool_or(coalesce(d.first_record_id, 0) > 0) as evicted
from fr_dumps d left join (select file, max(record_id) as last_record from fr_entries group by file) e using (file)
where d.rank is not null
group by d.rank;

-- pg_config entries that list members, as the picked dumps state them.
create or replace temp table fr_config as
select g.rank as dump_rank, coalesce(g.pg_name, '') as pg_name, g.pg_desc, g.ranks,
       array_to_string(g.ranks, ',') as ranks_key
from fr_groups g join fr_dump_of_rank p on p.file = g.file and p.rank = g.rank
where len(g.ranks) > 0;

-- Each entry's group: the rank's own pg_config entry of that name that lists it; else any dump's
-- entry of that name that lists the rank; else, for the default group, the rank's one nameless
-- entry (gloo registers the default group under '' and keeps only the last group it saw); else
-- members unknown (`ranks_key` null): the ranks whose dumps show that group.
create or replace temp table fr_entry_group as
with e as (
    select e.file, e.line, e.rank, coalesce(e.pg_name, '') as pg_name, e.pg_desc, e.pg_id
    from fr_entries e join fr_dump_of_rank p using (file, rank)
), keys as (select distinct rank, pg_name, pg_desc, pg_id from e)
, resolved as (
    select k.*, coalesce(
        (select min(c.ranks_key) from fr_config c
          where c.dump_rank = k.rank and c.pg_name = k.pg_name and list_contains(c.ranks, k.rank)),
        (select min(c.ranks_key) from fr_config c
          where c.pg_name = k.pg_name and list_contains(c.ranks, k.rank)),
        (select arg_max(c.ranks_key, (len(c.ranks), c.ranks_key)) from fr_config c
          where c.dump_rank = k.rank and (c.pg_name = '' or c.pg_desc = 'default_pg') and list_contains(c.ranks, k.rank)
            and (k.pg_id = 0 or k.pg_desc = 'default_pg'))
    ) as ranks_key
    from keys k
)
select e.file, e.line, e.rank, r.pg_name, r.ranks_key, r.pg_name || '|' || coalesce(r.ranks_key, '?') as gkey
from e join resolved r on r.rank = e.rank and r.pg_name = e.pg_name
  and r.pg_desc is not distinct from e.pg_desc and r.pg_id is not distinct from e.pg_id;

-- The groups: a label for the report (the name; the name and ranks where several groups share
-- one name; the pg_id where the name is empty) and the members in pg_config order (group-local
-- rank i is member i). Without pg_config the members are the ranks that show the group; in the
-- default group (pg_id 0) local ranks are global ones.
create or replace temp table fr_group as
with g as (
    select eg.gkey, any_value(eg.pg_name) as pg_name, any_value(eg.ranks_key) as ranks_key,
           min(en.pg_id) as pg_id, list(distinct eg.rank order by eg.rank) as seen
    from fr_entry_group eg join fr_entries en using (file, line)
    group by eg.gkey
)
select gkey,
       case when pg_name = '' then coalesce(cast(pg_id as varchar), '?')
            when count(*) over (partition by pg_name) > 1 then pg_name || '[' || coalesce(ranks_key, '?') || ']'
            else pg_name end as pg,
       coalesce(list_transform(string_split(ranks_key, ','), lambda x: cast(x as bigint)), seen) as members,
       ranks_key is not null as members_known, pg_id = 0 as is_default
from g;
