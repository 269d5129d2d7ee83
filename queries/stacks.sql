-- Where each rank stood in its last stack dump (faulthandler / py-spy): the innermost frame.
-- A hang leaves the waiting ranks inside a collective and the culprit somewhere else.
create or replace temp table last_dump as
select rank, file, max(line) as start from events
where kind = 'stack_dump_start' and rank is not null group by rank, file;

create or replace temp table stack_states as
select d.rank, arg_min(e.text, e.line) as top_frame, min(e.line) as line, d.file,
       regexp_matches(arg_min(e.text, e.line), 'torch/distributed/|distributed_c10d|c10d_logger|ProcessGroup') as in_collective
from last_dump d join events e
  on e.file = d.file and e.rank = d.rank and e.kind = 'stack_frame' and e.line > d.start
group by d.rank, d.file;

-- How long the job sat without progress before it ended, against its usual step time.
create or replace temp table progress_gap as
with steps as (
    select rank, ts, ts - lag(ts) over (partition by rank order by ts) as gap from progress where ts is not null and rank is not null
)
select (select max(ts) from events) - (select max(ts) from steps) as idle,
       (select median(epoch(gap)) from steps where gap is not null) as step_s;
