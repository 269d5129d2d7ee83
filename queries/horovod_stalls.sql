-- Horovod's stall inspector (parsers/formats/horovod.toml) as the runtime's own word. Its
-- `Stalled ranks:` list names each rank that has not submitted tensors others did, with them:
-- when only some ranks are listed, they are the ones the others wait for (a desync row, like
-- PyTorch's `didn't join`); when nearly every rank is listed, split by what each misses, the
-- ranks submitted different tensors at one point: their lists are votes, the odd ones out differ
-- (a mismatches row each). Older releases name the ready (or missing) ranks of each stalled op instead: the
-- ranks of the job not among them are the ones waited for.
create or replace temp table horovod_listed as
select file, line, coalesce(try_cast(nullif(regexp_extract(text, '^(\d+):', 1), '') as bigint), rank) as rank,
       regexp_extract(text, '\[([^\]]*)\]', 1) as tensors, ts
from events where kind = 'horovod_stalled_rank';

-- Each stalled op (in the warning's line, or one to a line after it) with its ready ranks, or
-- the missing ones where the release names those.
create or replace temp table horovod_ready as
select * from (
    select file, line, ts, op, list_transform(regexp_extract_all(listed, '\d+'), lambda x: cast(x as bigint)) as ranks, ready
    from (
        select file, line, ts,
               unnest(regexp_extract_all(text, '(\S+) \[(?:ready|missing) ranks: [\d, ]+\]', 1)) as op,
               unnest(regexp_extract_all(text, '\[(?:ready|missing) ranks: ([\d, ]+)\]', 1)) as listed,
               unnest(regexp_extract_all(text, '\[(ready|missing) ranks: [\d, ]+\]', 1)) = 'ready' as ready
        from events where kind in ('horovod_stall_warning', 'horovod_stalled_op')))
where list_max(ranks) < 131072;

-- The job's size as far as the report shows it: the ranks seen, or more when it names a higher one
-- (a listed rank, or one that submitted a stalled op).
create or replace temp table horovod_size as
select greatest((select count(*) from world), (select coalesce(max(rank), -1) + 1 from horovod_listed),
                (select coalesce(max(list_max(ranks)), -1) + 1 from horovod_ready)) as n;

insert into desync (file, line, ranks, verdict, ts)
select min(file), min(line), string_agg(distinct cast(rank as varchar), ', '), 'not_joined', min(ts)
from horovod_listed
having count(*) > 0 and count(distinct rank) * 2 < (select n from horovod_size);

insert into mismatches (file, line, what, rank_a, fp_a, ts)
select min(file), min(line), 'horovod_tensors', rank, any_value(tensors), min(ts)
from horovod_listed
where (select count(distinct rank) from horovod_listed) * 2 >= (select n from horovod_size)
group by rank;

-- Horovod's ranks are 0..size-1: the ready lists name the job's size at least up to their highest
-- rank, so a rank below it that no list names is waited for even where no line of its own is seen.
create or replace temp table horovod_waited as
with job as (
    select unnest(range(0, (select n from horovod_size))) as rank
    union select rank from world
)
select s.file, s.line, s.ts, s.op, w.rank from horovod_ready s, job w
where s.ready and not list_contains(s.ranks, w.rank)
union all
select file, line, ts, op, unnest(ranks) from horovod_ready where not ready;

-- A few ranks waited for: the ones the others wait for (per report line, as the runtime's word).
insert into desync (file, line, ranks, verdict, ts)
select file, line, string_agg(distinct cast(rank as varchar), ', '), 'not_joined', any_value(ts)
from horovod_waited
where (select count(distinct rank) from horovod_waited) * 2 < (select n from horovod_size)
group by file, line;

-- Half the ranks or more waited for, each for other ops: the ranks submitted different tensors
-- (two graphs that name their ops apart): the ops each one lacks are its vote, as above.
insert into mismatches (file, line, what, rank_a, fp_a, ts)
select min(file), min(line), 'horovod_tensors', rank, string_agg(distinct op, ', ' order by op), min(ts)
from horovod_waited
where (select count(distinct rank) from horovod_waited) * 2 >= (select n from horovod_size)
group by rank;
