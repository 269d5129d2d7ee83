-- One row per rank: what its own logs say happened to it. Errors are split into the rank's own
-- (an exception no format explains, OOM, a fatal signal) and collateral ones (timeouts, lost
-- peers, aborts after a timeout), because the first rank to time out is a victim.
-- A view: its readers take a few columns of it; a table copied every event's text (1 GB: 0.1 s).
-- An exception whose handling raised another (`During handling of the above exception, another
-- exception occurred:`) that is a consequence of another rank's failure (fairseq's "Unable to
-- unpickle data from other workers ... fallen out of sync" after the garbage it received failed
-- to unpickle): the chain is one failure, the last exception says whose.
create or replace temp table chained_to_collateral as
select t.file, t.line from events t
join events c on c.file = t.file and c.kind = 'traceback_chain' and c.line between t.line + 1 and t.line + 3
where t.kind = 'traceback'
  and (select p.kind from events p
       where p.file = t.file and p.line > c.line and p.kind in ('traceback', 'peer_failure_exception')
       order by p.line limit 1) = 'peer_failure_exception';

create or replace temp view rank_events as
select e.*, case
    when kind = 'traceback' and exists (select 1 from chained_to_collateral x where x.file = e.file and x.line = e.line)
         then 'collateral'
    -- NCCL's system or remote error raised in Python, where NCCL's transport reported failed links
    -- or connections a peer closed: the network's failure, or the peer's, reaching the rank
    when kind = 'traceback' and regexp_matches(text, 'NCCL Error [26]\b|ncclSystemError|ncclRemoteError|NCCL error: (?:unhandled system error|remote process exited)')
         and exists (select 1 from events n where n.kind in ('nccl_net_error', 'nccl_connection_closed')) then 'collateral'
    -- an allocation of more than an exabyte: a size that arrived garbled from a collective that
    -- failed (a broadcast object's length), not memory the rank ran out of
    when kind in ('traceback', 'out_of_memory') and text like '%Tried to allocate more than 1EB%' then 'collateral'
    -- (sglang's `Scheduler hit an exception:` is not here: the traceback glued to it ends in the
    -- exception, whose own line says whose it is)
    when kind in ('traceback', 'out_of_memory', 'nccl_cuda_failure', 'cuda_error', 'store_host_failed',
                  'megatron_nan_check') then 'own'
    when kind in ('init_error', 'nccl_remote_error', 'peer_failure_exception', 'gloo_timeout', 'watchdog_timeout', 'peer_connection_lost', 'nccl_connection_closed',
                  'nccl_net_error', 'watchdog_abort', 'gloo_size_mismatch', 'pg_status', 'pg_status_v23', 'sglang_load_barrier_timeout',
                  'dump_signal', 'terminate_called', 'monitored_barrier_failed',
                  'monitored_barrier_peer_error', 'desync_lagging_never_joined', 'desync_lagging_unfinished',
                  'desync_lagging_not_joined', 'nccl_unique_id_wait') then 'collateral'
    end as error_class
from events e where rank is not null;

-- Whether a rank's line came after it was told to stop: by time where both have one, else by
-- where it stands in the same file (a console's order); a line nothing places is not after it
-- (a paste's lines often have no time: silence is not to be assumed).
create or replace temp macro said_after_stop(ts, file, line, term_at, term_file, term_line) as
    term_line is not null and case
        when ts is not null and term_at is not null then ts > term_at
        else file = term_file and line > term_line end;

-- The processes the launcher stopped that no line gives a rank (torchrun's `Sending process P
-- closing signal`, spawn's `Terminating process P`): ranks of the job all the same.
create or replace temp table unranked_stopped as
select count(distinct pid) as n from exits where rank is null and reason = 'agent_sigterm';

create or replace temp table rank_exits as
select rank,
       -- a kill, or a death the runtime saw without a word from the process (NCCL RAS: dead; Ray's
       -- raylet: a worker died, but not one whose own watchdog had timed out: its abort is the end
       -- of that timeout)
       bool_or(signal = 9 or reason ilike '%out of memory%' or reason ilike '%oom%' or reason = 'process_dead'
               or (reason = 'worker_died' and rank not in (select rank from events where rank is not null
                                                           and kind in ('watchdog_timeout', 'watchdog_abort')))) as killed_hard,
       bool_or(signal in (11, 7, 4, 8)) as crashed_signal,
       -- the signal the process died of, where it is a crash's (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT)
       max(signal) filter (where signal in (11, 7, 4, 8, 6)) as fatal_signal,
       bool_or(reason = 'agent_sigterm' or signal = 15) as terminated,
       bool_or(exit_code = 0 and signal is null) as exited_zero,
       bool_or(exit_code > 0) as exited_error,
       bool_or(source = 'torchelastic_summary') as listed_failed,
       -- when it was told to stop from outside (the agent's SIGTERM, a SIGTERM it logged receiving)
       min(ts) filter (where reason in ('agent_sigterm', 'signal_received')) as term_at,
       -- and where it was told, for the lines without a time: a console's order says what came before
       arg_min(file, (ts, line)) filter (where reason in ('agent_sigterm', 'signal_received')) as term_file,
       arg_min(line, (ts, line)) filter (where reason in ('agent_sigterm', 'signal_received')) as term_line,
       bool_or(reason in ('agent_sigterm', 'signal_received')) as told_to_stop,
       min(ts) as exit_ts
from exits where rank is not null group by rank;

-- One grouped pass per table (not a subquery per column: DuckDB planned those 20 correlated
-- subqueries over the rank_events view in 60 ms, a paste's whole budget for the queries).
create or replace temp table rank_facts as
with first_key as (
    -- the order that picks a rank's first line of a class: its time, then where it is
    select *, (coalesce(ts, timestamp '2999-01-01'), file, line) as at_key
    from rank_events
), said as (
    select e.rank,
           min(ts) filter (where error_class = 'own') as own_error_at,
           arg_min(file, at_key) filter (where error_class = 'own') as own_error_file,
           arg_min(line, at_key) filter (where error_class = 'own') as own_error_line,
           count(*) filter (where error_class = 'own') as own_errors,
           -- the rank's first own error, numbers left out: what two ranks that failed alike share
           regexp_replace(arg_min(text, at_key) filter (where error_class = 'own'), '\d+', 'N', 'g') as own_error_shape,
           min(ts) filter (where error_class = 'collateral') as collateral_at,
           count(*) filter (where error_class = 'collateral') as collateral_errors,
           -- of those, the ones before it was told to stop: what it said after a SIGTERM is its
           -- shutdown (a handler's broadcast, a lost peer), not what it was doing
           count(*) filter (where error_class = 'collateral'
                              and not said_after_stop(e.ts, e.file, e.line, x.term_at, x.term_file, x.term_line))
             as collateral_before_stop,
           arg_min(kind, at_key) filter (where error_class = 'collateral') as first_collateral_kind,
           max(ts) as last_seen,
           bool_or((kind = 'nccl_destroy' and text ilike '%Destroy%') or kind in ('pg_not_destroyed', 'run_completed')) as said_it_ended
    from first_key e left join rank_exits x using (rank)
    group by e.rank
), stepped as (
    select rank, max(step) as last_step, max(total) as total_steps, max(ts) as last_step_at
    from progress where rank is not null group by rank
), placed as (
    select rank, any_value(host) as host from processes where rank is not null and host is not null group by rank
), summary as (
    -- torchrun's failure summary lists every failed worker: a rank missing from a summary
    -- that lists (nearly) every other rank did not fail. (With several agents, each lists only
    -- its own host's workers, so a short summary says nothing about the ranks it omits.) Only a
    -- summary that lists the workers the agent stopped (SIGTERM, -15) says so: one that lists
    -- only those that failed when it looked omits a worker still running then, stopped after.
    select count(distinct rank) >= (select n from world_size) - 2 and bool_or(signal = 15) as lists_nearly_all
    from exits where source = 'torchelastic_summary' having count(*) > 0
)
select w.rank,
       p.host,
       s.own_error_at, s.own_error_file, s.own_error_line, coalesce(s.own_errors, 0) as own_errors, s.own_error_shape,
       s.collateral_at, coalesce(s.collateral_errors, 0) as collateral_errors,
       coalesce(s.collateral_before_stop, 0) as collateral_before_stop, s.first_collateral_kind,
       g.last_step, g.total_steps, g.last_step_at,
       s.last_seen,
       x.killed_hard, x.crashed_signal, x.fatal_signal, x.terminated, x.term_at, x.term_file, x.term_line, coalesce(x.told_to_stop, false) as told_to_stop, x.exited_zero, x.exited_error, x.exit_ts,
       -- left on its own terms: exit 0, a clean communicator teardown, or its program's end
       -- (ProcessGroupNCCL destructed at exit; with no error of its own, a clean one; or its
       -- trainer's own word that the run finished, where no launcher reports a clean exit: gloo
       -- under torchrun or mpirun, which list only the workers that failed)
       coalesce(x.exited_zero, false) or coalesce(s.said_it_ended, false) as left_cleanly,
       exists (select 1 from summary) and not coalesce(x.listed_failed, false)
         and (select lists_nearly_all from summary) as absent_from_summary
from world w left join rank_exits x using (rank)
left join said s using (rank) left join stepped g using (rank) left join placed p using (rank);

-- A common-mode failure: every rank died the same way at about the same moment (the same crash
-- signal, or the same exception from the same place), none of them after waiting for another: the
-- cause is shared (the code path, a library, the environment), no rank took the others down. Or a
-- launcher that names only the first process to die (mpirun) saw one die of a crash signal while
-- every rank stopped at the same step without a word: had only that one died, the others would
-- have lost their peer or timed out waiting for it, and said so.
create or replace temp table common_mode as
with dead as (
    select rank, coalesce(case fatal_signal when 11 then 'SIGSEGV' when 7 then 'SIGBUS' when 4 then 'SIGILL'
                                            when 8 then 'SIGFPE' when 6 then 'SIGABRT' end || ' (signal ' || fatal_signal || ')',
                          own_error_shape) as how, coalesce(own_error_at, exit_ts) as died_at
    from rank_facts where fatal_signal is not null or own_errors > 0
), every as (
    select 'every' as basis, any_value(how) as how from dead
    where (select count(*) from dead) = (select count(*) from rank_facts)
      and (select count(*) from rank_facts) >= 2
      and not exists (select 1 from rank_facts where collateral_errors > 0 or killed_hard)
    having count(distinct how) = 1 and count(*) > 0
       and coalesce(max(died_at) - min(died_at) <= interval '5 seconds', true)
), silent as (
    select 'first_of_silent' as basis,
           any_value(case fatal_signal when 11 then 'SIGSEGV' when 7 then 'SIGBUS' when 4 then 'SIGILL' when 8 then 'SIGFPE'
                                       when 6 then 'SIGABRT' end || ' (signal ' || fatal_signal || ')') as how from rank_facts
    where fatal_signal is not null
      and (select count(*) from rank_facts) >= 2
      and not exists (select 1 from rank_facts where own_errors > 0 or collateral_errors > 0 or killed_hard
                                                      or terminated or exited_error or exited_zero)
      and (select count(distinct last_step) from rank_facts) = 1
      and (select count(*) from rank_facts where last_step is null) = 0
      and not exists (select 1 from every)
    having count(*) > 0
), reported as (
    -- Open MPI's or UCX's signal handler printed the same crash signal for several processes
    -- (host:pid, no rank), the launcher (mpirun, torchrun) names one rank dead of that signal,
    -- and no rank says a word of its own, of a lost peer or a timeout: they died together.
    select 'first_of_reported' as basis,
           any_value(case signal when 11 then 'SIGSEGV' when 7 then 'SIGBUS' when 4 then 'SIGILL' when 8 then 'SIGFPE'
                                 when 6 then 'SIGABRT' end || ' (signal ' || signal || ')') as how
    from exits where source in ('ompi', 'ucx') and reason = 'signal_report' and signal in (11, 7, 4, 8, 6)
      and exists (select 1 from exits m where m.signal = exits.signal
                    and (m.source = 'mpirun' and m.reason = 'signaled' or m.source = 'torchelastic' and m.reason = 'worker_failed'))
      and not exists (select 1 from rank_facts where own_errors > 0 or collateral_errors > 0 or killed_hard
                                                      or terminated or exited_zero)
      and not exists (select 1 from every) and not exists (select 1 from silent)
    having count(distinct signal) = 1 and count(distinct coalesce(host, '') || ':' || pid) >= 2
       and coalesce(max(ts) - min(ts) <= interval '5 seconds', true)
)
select * from every union all select * from silent union all select * from reported;
