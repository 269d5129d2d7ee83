-- What other ranks and systems did: timeouts, lost peers, aborts, the launcher's and the
-- scheduler's reactions. The first occurrence per (rank, kind), aligned time.
create or replace temp table collateral as
select rank, kind, min(aligned_ts) as time, arg_min(file, coalesce(aligned_ts, timestamp '2999-01-01')) as file,
       arg_min(line, coalesce(aligned_ts, timestamp '2999-01-01')) as line, arg_min(text, coalesce(aligned_ts, timestamp '2999-01-01')) as text
from timeline_events
where kind in ('gloo_timeout', 'watchdog_timeout', 'peer_connection_lost', 'nccl_connection_closed', 'nccl_net_error',
               'watchdog_abort', 'gloo_size_mismatch', 'terminate_called', 'dump_signal', 'pg_status', 'pg_status_v23')
   or kind ilike 'torchelastic%' or kind ilike 'slurm%' or kind ilike 'srun%' or kind ilike 'child_failed%'
group by rank, kind;
