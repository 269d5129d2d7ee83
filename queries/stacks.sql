-- Where each rank stood in its last stack dump (faulthandler / py-spy): the innermost frame.
-- A hang leaves the waiting ranks inside a collective and the culprit somewhere else.
-- A dump lists every thread; the main thread's stack is where the rank's training loop stood
-- (py-spy's `"MainThread"`, faulthandler's `Current thread`), else the last thread dumped.
create or replace temp table last_dump as
select rank, file, coalesce(max(line) filter (where text like '%"MainThread"%' or starts_with(ltrim(text), 'Current thread')),
                            max(line)) as start
from events
where kind = 'stack_dump_start' and rank is not null group by rank, file;

create or replace temp table stack_states as
select d.rank, arg_min(e.text, e.line) as top_frame, min(e.line) as line, d.file,
       -- a frame of torch.distributed, or a function of the script's named for the collective it
       -- wraps (fairseq's `all_reduce_dict`, a `_gather_metrics_all_gather`): py-spy shows no C frame
       regexp_matches(arg_min(e.text, e.line), 'torch/distributed/|distributed_c10d|c10d_logger|ProcessGroup')
       or regexp_matches(arg_min(e.text, e.line), '(?:^\s*|\bin |_)(?:all_?reduce|all_?gather|reduce_scatter|broadcast|barrier|all_?to_?all)\w*(?: \(|\s*$)', 'i') as in_collective
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
