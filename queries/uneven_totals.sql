-- Ranks that ran out of batches first. Each rank's last progress row that counts toward a total
-- (`812/812`, `813/851`): where some ranks had reached their total and every other rank, counting
-- to a larger one, had already gone past it, the loop had fewer batches on those ranks (uneven
-- inputs: a sampler or dataset split that is not the same length on every rank). They left the
-- loop while the others went on into collectives they never joined.
create or replace temp table short_totals as
with last as (
    select rank, file, line, step, total from progress
    where rank is not null and total is not null and total > 0
    -- a bar redrawn with `\r` in a file is one physical line of many rows (one per redraw, counting up)
    qualify row_number() over (partition by rank order by ts desc nulls last, file desc, line desc, step desc) = 1
), finished as (
    select * from last where step = total
), running as (
    select * from last where step < total
)
select f.rank, f.file, f.line, f.step, f.total,
       (select min(r.step) from running r) as others_step, (select min(r.total) from running r) as others_total
from finished f
where exists (select 1 from running)
  and (select count(*) from running) + (select count(*) from finished) = (select count(*) from last)
  and (select bool_and(r.step > f.total and r.total > f.total) from running r)
  and (select count(*) from finished) < (select count(*) from running) + (select count(*) from finished);
