-- The first rank to stop issuing collectives: per (pg, counter), ranks whose last seq is below
-- the group's highest are behind; the lowest last seq wins, ties broken by earlier last activity.
-- Only counters that at least two ranks report can say who is behind.
create or replace temp table behind as
select l.*, g.max_seq, g.ranks
from may_be_behind l join (
    select pg, counter, max(last_seq) as max_seq, count(*) as ranks
    from last_seq group by pg, counter having count(*) >= 2
) g using (pg, counter)
where l.last_seq < g.max_seq;

-- A rank of the world with no row at all in the world-wide group of a counter that logs every
-- collective (NCCL COLL, DETAIL, Flight Recorder), while the others have rows, never showed a
-- collective (its log may be missing): it is behind everyone. Watchdog SeqNums are not such a
-- counter: only the ranks whose watchdog fired report them.
insert into behind
select g.pg, g.counter, w.rank, null as host, null as last_seq, null as last_op, null as last_seen,
       null as file, null as line, false as timed_out, g.max_seq, g.ranks
from world w cross join (
    select pg, counter, max(last_seq) as max_seq, count(*) as ranks from last_seq
    where (counter in ('detail_seq', 'fr_seq') and pg = '0')
       or (counter = 'nccl_opcount' and pg in (select comm_id from comms where nranks = (select n from world_size)))
    group by pg, counter
    having count(*) * 2 >= (select n from world_size) and count(*) < (select n from world_size)
) g
where w.rank not in (select rank from last_seq l where l.pg = g.pg and l.counter = g.counter);

create or replace temp table first_stalled as
select * from behind
order by case counter when 'pg_seq' then 0 when 'fr_seq' then 1 when 'detail_seq' then 2 else 3 end,
         last_seq nulls first, last_seen nulls last, rank
limit 1;
