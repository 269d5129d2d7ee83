-- A console without rank markers (a plain paste of every rank's output) holds each rank's
-- traceback as a block of unranked lines, from `Traceback (most recent call last):` to the next.
-- A block that ends in a DETAIL report is its reporter's: `Rank N is running collective: ...`
-- names the rank that raised it. Where every other rank of the world has its block so, in one
-- file, the one block left is the one rank left's. Both are readings (rank_readings).
create or replace temp table traceback_blocks as
with lines as (
    select file, line,
           sum(case when kind = 'traceback_start' then 1 else 0 end)
               over (partition by file order by line rows unbounded preceding) as block
    from events where rank is null and kind in ('traceback_start', 'traceback_frame', 'traceback', 'detail_mismatch')
)
select l.file, l.block, min(l.line) as first_line, max(l.line) as last_line,
       min(m.rank_a) as reporter, count(distinct m.rank_a) as reporters
from lines l left join mismatches m on m.file = l.file and m.line = l.line and m.what = 'detail_fingerprint'
where l.block > 0
group by l.file, l.block;

create or replace temp table traceback_block_ranks as
select file, first_line, last_line, reporter as rank, 'reporter' as how from traceback_blocks where reporters = 1
union all
select b.file, b.first_line, b.last_line,
       (select min(rank) from world where rank not in (select reporter from traceback_blocks where reporters = 1)), 'left'
from traceback_blocks b
where b.reporters = 0
  and (select count(*) from traceback_blocks where reporters = 0) = 1
  and (select count(distinct file) from traceback_blocks) = 1
  and (select count(*) from world) = (select count(distinct reporter) from traceback_blocks where reporters = 1) + 1
  and (select count(*) from world where rank not in (select reporter from traceback_blocks where reporters = 1)) = 1;

insert into rank_readings
select case how when 'reporter' then 'a traceback without a rank marker that ends in a DETAIL report'
                else 'the one traceback without a rank marker left beside the DETAIL reporters'' own' end,
       case how when 'reporter' then 'the reporter''s rank (Rank N is running collective: ...)'
                else 'the one rank of the world whose traceback is not otherwise here' end,
       sum(last_line - first_line + 1)
from traceback_block_ranks group by how;

update events e set rank = r.rank
from traceback_block_ranks r
where e.rank is null and e.file = r.file and e.line between r.first_line and r.last_line
  and e.kind in ('traceback_start', 'traceback_frame', 'traceback', 'detail_mismatch');
