-- c10 and torchelastic (>= 2.3) lines carry MMDD without a year; the parser took the year of the
-- file's mtime, which a copy or a git checkout resets. Prefer the year of a dated line (python
-- logging, SLURM, NCCL WARN) in the same file, else on the same host, else anywhere in the job:
-- shift each file's year-less times by whole years to land within a year before that reference.
create or replace temp table year_shift as
with dated as (
    select file, host, max(ts) as ts from events
    where ts is not null and ts_inferred is distinct from 'carried' and coalesce(ts_inferred, '') not like '%year%'
    group by file, host
), undated as (
    select file, any_value(host) as host, max(ts) as ts from events
    where ts_inferred like '%year%' group by file
), refs as (
    select u.file, u.ts as undated_max, coalesce(
        (select max(d.ts) from dated d where d.file = u.file),
        (select max(d.ts) from dated d where d.host = u.host),
        (select max(ts) from dated)) as ref
    from undated u
), shifts as (
    select file, undated_max, ref, year(ref) - year(undated_max) as years from refs where ref is not null
)
select file, years - case when undated_max + to_years(years) > ref + interval 30 days then 1 else 0 end as years,
       year(undated_max) as undated_year
from shifts;
