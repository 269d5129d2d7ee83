-- Memory kills the scheduler reports without naming a task: sacct's MaxRSSTask (a GLOBAL task
-- id) of the largest step is the rank that held the most memory, the likely trigger.
create or replace temp table sacct_rows as
select file, line, string_split(text, '|') as cols from events where kind = 'sacct';

create or replace temp table memory_heaviest_task as
with h as (select file, cols from sacct_rows where cols[1] = 'JobID'),
steps as (
    select r.file, r.line, r.cols[1] as step,
           r.cols[list_position(h.cols, 'MaxRSS')] as maxrss,
           try_cast(r.cols[list_position(h.cols, 'MaxRSSTask')] as bigint) as task
    from sacct_rows r join h using (file)
    where r.cols[1] <> 'JobID' and list_position(h.cols, 'MaxRSSTask') is not null
      and r.cols[1] not like '%.batch' and r.cols[1] not like '%.extern'
)
select task as rank, step, maxrss, file, line from steps where task is not null
order by try_cast(regexp_replace(maxrss, '[KMG]$', '') as double)
         * case right(maxrss, 1) when 'G' then 1048576 when 'M' then 1024 else 1 end desc nulls last
limit 1;

create or replace temp table memory_kills as
select file, line, reason, text from exits
where reason in ('memory_limit', 'job_memory_limit', 'oom_kill', 'task_oom', 'oom', 'oom_killed')
   or text ilike '%OUT_OF_MEMORY%';
