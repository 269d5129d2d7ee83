-- The first rank to stop issuing collectives: per (pg, counter), ranks whose last seq is below
-- the group's highest are behind; the lowest last seq wins, ties broken by earlier last activity.
-- Only counters that at least two ranks report can say who is behind.
create or replace temp table behind as
select l.*, g.max_seq, g.ranks
from last_seq l join (
    select pg, counter, max(last_seq) as max_seq, count(*) as ranks
    from last_seq group by pg, counter having count(*) >= 2
) g using (pg, counter)
where l.last_seq < g.max_seq;

create or replace temp table first_stalled as
select * from behind
order by case counter when 'pg_seq' then 0 when 'fr_seq' then 1 when 'detail_seq' then 2 else 3 end,
         last_seq, last_seen nulls last, rank
limit 1;
