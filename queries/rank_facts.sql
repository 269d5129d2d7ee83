-- One row per rank: what its own logs say happened to it. Errors are split into the rank's own
-- (an exception no format explains, OOM, a fatal signal) and collateral ones (timeouts, lost
-- peers, aborts after a timeout), because the first rank to time out is a victim.
-- A view: its readers take a few columns of it; a table copied every event's text (1 GB: 0.1 s).
create or replace temp view rank_events as
select e.*, case
    when kind in ('traceback', 'out_of_memory', 'nccl_cuda_failure', 'cuda_error') then 'own'
    when kind in ('nccl_remote_error', 'gloo_timeout', 'watchdog_timeout', 'peer_connection_lost', 'nccl_connection_closed',
                  'nccl_net_error', 'watchdog_abort', 'gloo_size_mismatch', 'pg_status', 'pg_status_v23',
                  'dump_signal', 'terminate_called', 'monitored_barrier_failed',
                  'monitored_barrier_peer_error', 'desync_lagging_never_joined', 'desync_lagging_unfinished',
                  'desync_lagging_not_joined') then 'collateral'
    end as error_class
from events e where rank is not null;

create or replace temp table rank_exits as
select rank,
       bool_or(signal = 9 or reason ilike '%out of memory%' or reason ilike '%oom%') as killed_hard,
       bool_or(signal in (11, 7, 4, 8)) as crashed_signal,
       bool_or(reason = 'agent_sigterm' or signal = 15) as terminated,
       bool_or(exit_code = 0 and signal is null) as exited_zero,
       bool_or(exit_code > 0) as exited_error,
       bool_or(source = 'torchelastic_summary') as listed_failed,
       min(ts) as exit_ts
from exits where rank is not null group by rank;

create or replace temp table rank_facts as
select w.rank,
       (select any_value(host) from processes p where p.rank = w.rank and host is not null) as host,
       (select min(ts) from rank_events e where e.rank = w.rank and error_class = 'own') as own_error_at,
       (select arg_min(file || ':' || line, coalesce(ts, timestamp '2999-01-01')) from rank_events e
         where e.rank = w.rank and error_class = 'own') as own_error_where,
       (select count(*) from rank_events e where e.rank = w.rank and error_class = 'own') as own_errors,
       (select min(ts) from rank_events e where e.rank = w.rank and error_class = 'collateral') as collateral_at,
       (select count(*) from rank_events e where e.rank = w.rank and error_class = 'collateral') as collateral_errors,
       (select max(step) from progress g where g.rank = w.rank) as last_step,
       (select max(total) from progress g where g.rank = w.rank) as total_steps,
       (select max(ts) from progress g where g.rank = w.rank) as last_step_at,
       (select max(ts) from rank_events e where e.rank = w.rank) as last_seen,
       x.killed_hard, x.crashed_signal, x.terminated, x.exited_zero, x.exited_error, x.exit_ts,
       -- left on its own terms: exit 0 or a clean communicator teardown
       coalesce(x.exited_zero, false)
         or exists (select 1 from events e where e.rank = w.rank and e.kind = 'nccl_destroy' and e.text ilike '%Destroy%')
         as left_cleanly,
       -- torchrun's failure summary lists every failed worker: a rank missing from a summary
       -- that lists (nearly) every other rank did not fail. (With several agents, each lists only
       -- its own host's workers, so a short summary says nothing about the ranks it omits.)
       exists (select 1 from exits where source = 'torchelastic_summary')
         and not coalesce(x.listed_failed, false)
         and (select count(distinct rank) from exits where source = 'torchelastic_summary')
             >= (select n from world_size) - 2
         as absent_from_summary
from world w left join rank_exits x using (rank);
