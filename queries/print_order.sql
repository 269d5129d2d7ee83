-- Where each rank's own prints stopped. A script prints the same lines on every rank, its numbers
-- aside (`Rank 3: moving model to cuda:3`, `Rank 3: wrapping model in DistributedDataParallel`):
-- one template per line, in the order the script runs them. Where most ranks' last print is one
-- template and a few ranks' last is one the others printed before it, those few stopped short of
-- where the rest went on to (and then waited).
create or replace temp table rank_prints as
select rank, file, line, text, regexp_replace(text, '\d+', '#', 'g') as template,
       -- the line as every rank prints it, its own rank aside: counters kept (`batch 41`, `#48217`)
       regexp_replace(text, '(?i)\b(rank|proc|process|gpu)([ :=]*)\d+', '\1\2N', 'g') as said,
       row_number() over (partition by rank order by ts nulls last, file, line) as k
from events
-- a print, or a line of the script's own logger that no format reads further
where rank is not null and kind in ('other', 'rank_print', 'python_logging', 'python_logging_default', 'python_logging_mdy',
                                           'timestamped_print', 'vllm_logger')
  and length(trim(text)) >= 8;

create or replace temp table prints_behind as
with firsts as (
    select rank, template, min(k) as k from rank_prints group by rank, template
), lasts as (
    select rank, file, line, text, template from rank_prints
    qualify row_number() over (partition by rank order by k desc) = 1
), majority as (
    select template, count(*) as n from lasts group by template
    having count(*) >= 2 and 2 * count(*) > (select count(distinct rank) from rank_prints)
), leaders as (
    select l.rank, l.template from lasts l join majority m using (template)
)
-- a minority rank: its last print is one every leader printed before its own last, and it never
-- printed the leaders' last
select b.rank, b.file, b.line, b.text, any_value(m.template) as ahead_template
from lasts b, majority m
where b.template <> m.template
  and not exists (select 1 from firsts f where f.rank = b.rank and f.template = m.template)
  and (select count(*) from leaders) = (
      select count(*) from leaders ld
      join firsts before on before.rank = ld.rank and before.template = b.template
      join firsts leader_last on leader_last.rank = ld.rank and leader_last.template = ld.template
      where before.k < leader_last.k)
group by b.rank, b.file, b.line, b.text;


-- Where no majority decides, the numbers the prints keep say how far each rank got: the ranks
-- whose last line every rank of the front (those whose last line is one line F) printed before
-- F, and that never printed F, stopped short (`batch 40` where the other went on to `batch 41`; a
-- kernel's `#48216 begin` never followed by its `end` while the others began `#48217`). Not a
-- rank that timed out waiting in a collective itself: it stood in one, as the others did.
insert into prints_behind
with lasts as (
    select rank, file, line, text, said, k from rank_prints
    qualify row_number() over (partition by rank order by k desc) = 1
), fronts as (
    select c.said from (select distinct said from lasts) c
    where exists (select 1 from lasts b where b.said <> c.said)
      and not exists (
        select 1 from lasts b where b.said <> c.said and (
            exists (select 1 from rank_prints p where p.rank = b.rank and p.said = c.said)
            or exists (select 1 from lasts f where f.said = c.said and not exists (
                select 1 from rank_prints p where p.rank = f.rank and p.said = b.said and p.k < f.k))))
)
select b.rank, b.file, b.line, b.text, (select any_value(template) from rank_prints p where p.said = f.said)
from lasts b, fronts f
where b.said <> f.said and (select count(*) from fronts) = 1
  and not exists (select 1 from prints_behind)
  and not exists (select 1 from rank_facts r where r.rank = b.rank and r.collateral_errors > 0);
