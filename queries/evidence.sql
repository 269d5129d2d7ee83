-- The lines that decide a verdict, for its evidence (correlator/verdict.py: evidence). Not a stage
-- of the analysis: views, run once the other stages have, over their tables and
-- `evidence_culprits` (the verdict's culprit ranks, filled once the verdict is known). Each view
-- gives (file, line, rank, k): k orders its lines, the most deciding first. The rules' `evidence`
-- queries (correlator/rules.toml) choose among them; the verdict cites each rule's lines first,
-- then `evidence_deciding`, then the rest of its `evidence_kinds`.
create temp table if not exists evidence_culprits (rank bigint);

-- A rank's own file before the console that tees it (torchrun copies each rank's lines there).
create or replace temp view evidence_rank_files as select distinct file from rank_by_file;

-- The report's divergence (Flight Recorder's where it found one other than every rank timing out
-- in one collective, else the counters'), one line per rank: the line that shows what the rank
-- issued there, and which group of ranks it is in (the ranks that issued the same op, size, dtype).
-- Of a rank's lines at that seq, the one that issues it before the one that times out in it.
create or replace temp view evidence_divergence_rows as
with fr as (
    select e.file, e.line, v.rank, concat_ws('|', o.op, o.sig) as grp
    from fr_evidence e join events v using (file, line) left join fr_divergence_ops o on o.rank = v.rank
    where exists (select 1 from fr_divergence where finding <> 'timed_out')
), seq as (
    select s.file, s.line, s.rank, concat_ws('|', s.op, s.numel_in, s.dtype) as grp
    from seq_rows s join divergence d using (pg, counter, seq)
    where not exists (select 1 from fr_divergence where finding <> 'timed_out')
    qualify row_number() over (
        partition by s.rank
        order by case s.state when 'issued' then 0 when 'started' then 1 when 'scheduled' then 2 when 'completed' then 3
                              when 'timeout' then 4 else 5 end,
                 s.file in (select file from evidence_rank_files) desc, s.ts nulls last, s.file, s.line) = 1
), past as (  -- a rank past the divergence (ranks_past) has no line there: its line where it stands
    select s.file, s.line, s.rank, 'past' as grp
    from seq_rows s join divergence d using (pg, counter)
    join standing t on t.pg = s.pg and t.counter = s.counter and t.rank = s.rank and t.seq = s.seq
    where s.rank in (select rank from ranks_past) and s.rank not in (select rank from seq)
      and not exists (select 1 from fr_divergence where finding <> 'timed_out')
    qualify row_number() over (
        partition by s.rank
        order by s.state = 'timeout', s.file in (select file from evidence_rank_files) desc, s.ts nulls last, s.file, s.line) = 1
)
select * from fr union all select * from seq union all select * from past;

-- Their order: the first culprit's line, then one line of each other group (the largest first),
-- then (tier 3) the other culprits' lines and (4) the rest. Tier 2 is the culprit's last line
-- (evidence_culprit_last).
create or replace temp view evidence_divergence as
with r as (
    select *, rank in (select rank from evidence_culprits) as culprit,
           count(*) over (partition by grp) as size,
           row_number() over (partition by grp order by rank, file, line) as nth
    from evidence_divergence_rows
)
select file, line, rank, tier, row_number() over (order by tier, size desc, grp, rank, file, line) as k
from (select *, case when culprit and rank = (select min(rank) from r where culprit) then 0
                     when not culprit and nth = 1 then 1
                     when culprit then 3 else 4 end as tier
      from r);

-- The culprit's last line: its last collective (the one first_stalled names, else its last of the
-- most telling counter), then its last progress step.
create or replace temp view evidence_culprit_last as
with coll as (
    select l.file, l.line, l.rank from last_seq l
    where l.rank in (select rank from evidence_culprits) and l.file is not null
    qualify row_number() over (
        partition by l.rank
        order by exists (select 1 from first_stalled f where f.pg = l.pg and f.counter = l.counter and f.rank = l.rank) desc,
                 case l.counter when 'pg_seq' then 0 when 'fr_seq' then 1 when 'detail_seq' then 2 else 3 end,
                 l.last_seen desc nulls last, l.pg, l.file, l.line) = 1
), step as (
    select g.file, g.line, g.rank from progress g
    where g.rank in (select rank from evidence_culprits) and g.file is not null
    qualify row_number() over (
        partition by g.rank
        order by g.step desc nulls last, g.ts desc nulls last, g.file in (select file from evidence_rank_files) desc,
                 g.file, g.line) = 1
)
select file, line, rank, row_number() over (order by rank, part, file, line) as k
from (select *, 0 as part from coll union all select *, 1 from step);

-- Where each group of ranks stopped (the report's table of the last collective per process
-- group): per PG, counter and last seq, the line of its lowest rank there, the smallest groups
-- first. A seq the report states is then found in a line it cites.
create or replace temp view evidence_last_collectives as
with g as (
    select pg, counter, last_seq, min(rank) as rank, count(*) as n from last_seq
    where last_seq is not null group by pg, counter, last_seq
), lines as (
    select s.file, s.line, s.rank, g.n, g.pg, g.counter, g.last_seq from g
    join seq_rows s on s.pg = g.pg and s.counter = g.counter and s.seq = g.last_seq and s.rank = g.rank
    qualify row_number() over (
        partition by g.pg, g.counter, g.last_seq
        order by case s.state when 'issued' then 0 when 'started' then 1 when 'scheduled' then 2 when 'completed' then 3
                              when 'timeout' then 4 else 5 end,
                 s.file in (select file from evidence_rank_files) desc, s.ts nulls last, s.file, s.line) = 1
)
select file, line, rank, row_number() over (order by n, pg, counter, last_seq, rank) as k from lines;

-- What every verdict cites after its rule's own lines: the lines at the divergence and the
-- culprit's last line, then where each group of ranks stopped.
create or replace temp view evidence_deciding as
select file, line, rank, row_number() over (order by tier, k) as k from (
    select file, line, rank, tier, k from evidence_divergence
    union all
    select file, line, rank, 2, k from evidence_culprit_last
    union all
    select file, line, rank, 5, k from evidence_last_collectives);

-- The culprits' own errors (one of each text, its own file first), then how their processes
-- ended (a fatal signal, an error exit; not the SIGTERM a launcher sends every rank): the
-- launcher's or srun's line on the process first, the node daemon's next, earliest first. (Not the
-- torchrun failure summary's entries: each is cited at its `[N]:` header, a line that says nothing.)
create or replace temp view evidence_culprit_errors as
with own as (
    select e.file, e.line, e.rank, e.ts, 0 as part from rank_events e
    where e.error_class = 'own' and e.rank in (select rank from evidence_culprits)
    -- of one error said twice (the traceback, then the launcher's copy of it), the first in the file
    qualify row_number() over (partition by e.rank, e.kind, e.text
                               order by e.file in (select file from evidence_rank_files) desc, e.file, e.line) = 1
), ended as (
    select x.file, x.line, x.rank, x.ts, case when x.source in ('slurmstepd', 'slurmctld') then 2 else 1 end as part from exits x
    where x.rank in (select rank from evidence_culprits) and x.file is not null
      and x.source not in ('torchelastic_summary', 'sacct', 'jobcomp', 'scontrol')
      and (x.signal in (4, 6, 7, 8, 9, 11) or (x.exit_code > 0 and coalesce(x.signal, 0) <> 15)
           or x.reason ilike '%oom%' or x.reason ilike '%out of memory%')
), summarised as (   -- torchrun's failure table, where it is the only word on how the culprit ended
    select x.file, x.line, x.rank, x.ts, 3 as part from exits x
    where x.rank in (select rank from evidence_culprits) and x.source = 'torchelastic_summary'
      and (x.signal in (4, 6, 7, 8, 9, 11) or (x.exit_code > 0 and coalesce(x.signal, 0) <> 15))
      and x.rank not in (select rank from own union all select rank from ended)
)
select file, line, rank, row_number() over (order by part, ts nulls last, rank, file, line) as k
from (select * from own union all select * from ended union all select * from summarised);

-- How the culprits left on their own terms: a clean exit (0), their communicator destroyed.
create or replace temp view evidence_clean_exit as
select file, line, rank, row_number() over (order by ts nulls last, rank, file, line) as k from (
    select file, line, rank, ts from exits
    where rank in (select rank from evidence_culprits) and exit_code = 0 and signal is null and file is not null
    union all
    select file, line, rank, ts from events
    where rank in (select rank from evidence_culprits) and kind = 'nccl_destroy' and text ilike '%Destroy%');

-- What the others did meanwhile: each other rank's first line that says it waited (a timeout, a
-- lost peer), its own file first.
create or replace temp view evidence_waiting as
select file, line, rank, row_number() over (order by rank) as k from (
    select * from rank_events
    where error_class = 'collateral' and rank not in (select rank from evidence_culprits)
    qualify row_number() over (partition by rank order by ts nulls last, file in (select file from evidence_rank_files) desc,
                                                          file, line) = 1);

-- Each rank's last progress step, the culprits' first: how far each got.
create or replace temp view evidence_last_steps as
select file, line, rank, row_number() over (order by rank not in (select rank from evidence_culprits), rank) as k
from (
    select * from progress where rank is not null and file is not null
    qualify row_number() over (partition by rank
                               order by step desc nulls last, ts desc nulls last,
                                        file in (select file from evidence_rank_files) desc, file, line) = 1);

-- The lines that say the run ended well: the trainer's own word per rank, the launcher's, then
-- each rank's last step, then the scheduler's COMPLETED.
create or replace temp view evidence_completed as
select file, line, rank, row_number() over (order by part, k) as k from (
    select file, line, rank, 0 as part, row_number() over (order by kind, rank nulls last, file, line) as k from events
    where kind in ('run_completed', 'torchelastic_group_finished')
    qualify row_number() over (partition by rank, kind order by file in (select file from evidence_rank_files) desc, file, line) = 1
    union all
    select file, line, rank, 1, k from evidence_last_steps
    union all
    select file, line, rank, 2, row_number() over (order by ts nulls last, file, line) from exits
    where reason = 'completed' or (exit_code = 0 and rank is null and source = 'shell'));

-- The scheduler's word that it ended the job, the plainest first: its step daemon's and
-- controller's one-line messages before the accounting records (sacct rows, jobcomp records).
-- The verdict's summary quotes the first (correlator/verdict.py: scheduler_note).
create or replace temp view evidence_scheduler_end as
select file, line, rank, text, reason,
       row_number() over (order by case source when 'slurmstepd' then 0 when 'slurmctld' then 1 when 'srun' then 2
                                               when 'scontrol' then 4 when 'sacct' then 5 when 'jobcomp' then 6 else 3 end,
                                   ts nulls last, file, line) as k
from exits
where (reason in ('time_limit', 'cancelled', 'preemption', 'node_failure', 'requeue', 'scancel', 'timeout',
                  'preempted', 'node_fail', 'deadline_exceeded', 'evicted')
       -- the launcher's agent signalled from outside (rules.toml: scheduler_ended_it)
       or (reason = 'agent_signaled' and signal = 1)) and file is not null;

-- The memory kill: the scheduler's own lines, then the accounting row that names the task that
-- held the most memory (sacct MaxRSSTask).
create or replace temp view evidence_memory as
select file, line, null::bigint as rank, row_number() over (order by part, file, line) as k from (
    select file, line, 0 as part from memory_kills
    union all
    select file, line, 1 from memory_heaviest_task);

-- The runtime's own diagnosis of who never arrived: the desync report, the monitored barrier (its
-- own report first, then the ranks that reached it and heard nothing from their peer).
create or replace temp view evidence_laggards as
select file, line, rank, row_number() over (order by verdict = 'monitored_barrier_peer', ts nulls last, file, line) as k
from desync
where verdict in ('monitored_barrier', 'never_joined', 'not_joined', 'monitored_barrier_peer')
qualify row_number() over (partition by rank, ranks, verdict order by file in (select file from evidence_rank_files) desc,
                                                                   ts nulls last, file, line) = 1;

-- Mismatches the runtime named (DETAIL fingerprints, DDP parameter counts): the culprits' own
-- reports first, one of each report a rank gave.
create or replace temp view evidence_mismatch as
select file, line, rank, row_number() over (order by rank_a not in (select rank from evidence_culprits), rank_a, ts nulls last, file, line) as k
from (
    select * from mismatches where file is not null
    qualify row_number() over (partition by rank_a, what, fp_a, n_a
                               order by file in (select file from evidence_rank_files) desc, ts nulls last, file, line) = 1);

-- Where each rank stood in its last stack dump: the culprits' frames outside a collective, then one
-- of the others', inside one.
create or replace temp view evidence_stacks as
select file, line, rank, row_number() over (order by rank not in (select rank from evidence_culprits), in_collective, rank) as k
from stack_states;

-- A common-mode failure: how each rank died, one line a rank in rank order: its own error, else
-- the line that gives its fatal signal (of torchrun's failure summary, the entry's `exitcode`
-- line, not its `[N]:` header).
create or replace temp view evidence_common_mode as
with how as (
    select e.file, e.line, e.rank, e.ts, 0 as part from rank_events e where e.error_class = 'own'
    union all
    select coalesce(c.file, x.file), coalesce(c.line, x.line), x.rank, x.ts, 1 from exits x
    left join events c on x.source = 'torchelastic_summary' and c.file = x.file
                      and c.line between x.line + 1 and x.line + 6 and regexp_matches(c.text, '^\s*exitcode\s*:')
    where x.file is not null and x.rank is not null and x.signal in (4, 6, 7, 8, 11)
      and x.source not in ('sacct', 'jobcomp', 'scontrol')
)
select file, line, rank, row_number() over (order by rank) as k from how
qualify row_number() over (partition by rank order by part, ts nulls last,
                           file in (select file from evidence_rank_files) desc, file, line) = 1;
