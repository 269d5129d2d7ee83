-- Lines that say something went wrong, whoever wrote them: a rank, the launcher, the scheduler,
-- or a paste whose lines name no rank. One of them is enough to rule `healthy` out, and a verdict
-- no rule decides cites them and takes its best reading from them (`reading`).
-- Error-level lines (c10 `E`/`F`, logging ERROR/CRITICAL, slurm error:) count whatever their
-- kind; so do the formats of failures, at any level; and an unrecognised line that speaks of a
-- failure in words (a paste's `RuntimeError: ...` without its `Traceback` header), not a word
-- that only names a column or a setting (nccl-tests' `error` column, `error_file: <N/A>`).
create or replace temp table error_lines as
with failing as (
    select file, line, rank, kind, level, ts, text from events
    where level in ('ERROR', 'FATAL')
       or kind in ('traceback', 'out_of_memory', 'nccl_cuda_failure', 'cuda_error', 'nccl_remote_error', 'peer_failure_exception', 'init_error', 'store_host_failed', 'sglang_scheduler_exception',
                   'ray_worker_died', 'ray_train_worker_failed', 'ray_train_failed_rank', 'ray_train_group_failed', 'vllm_worker_died', 'fatal_python_error', 'terminate_called',
                   'gloo_timeout', 'watchdog_timeout', 'watchdog_abort', 'peer_connection_lost', 'heartbeat_monitor',
                   'nccl_connection_closed', 'nccl_net_error', 'gloo_size_mismatch', 'pg_status', 'pg_status_v23',
                   'detail_mismatch', 'ddp_model_mismatch', 'monitored_barrier_failed', 'monitored_barrier_peer_error', 'sglang_load_barrier_timeout',
                   'desync_lagging_never_joined', 'desync_lagging_unfinished', 'desync_lagging_not_joined',
                   'nccl_ras_mismatch', 'nccl_ras_dead', 'nccl_ras_comm_problem', 'nccl_ras_timeouts',
                   'srun_task_exit', 'srun_task_signal', 'slurm_oom_kill', 'slurm_memory_limit', 'slurm_job_oom',
                   'torchelastic_worker_exit', 'torchelastic_worker_signaled', 'launcher_exception', 'spawn_process_exited',
                   'k8s_pytorchjob_failed', 'k8s_jobset_failed')
       -- torchrun's failure table, but not the rules around it (dashes look alike everywhere)
       or (kind = 'torchelastic_summary' and not regexp_matches(text, '^[-=]+$'))
       or (kind in ('other', 'text', 'rank_print', 'timestamped_print') and regexp_matches(text,
           '(\w(Error|Exception)(:|$)|\b(error|Error|ERROR):|\bERROR\b|\bFAILED\b|Traceback|[Ff]atal error|'
           '[Ss]egmentation fault|core dumped|timed out|\b[Aa]borted\b|\bKilled\b|[Uu]nhandled|'
           '(reset|closed) by (remote )?peer|[Bb]roken pipe|out of memory)'))
)
select *, case
    when kind in ('detail_mismatch', 'ddp_model_mismatch', 'gloo_size_mismatch', 'nccl_ras_mismatch') then 'collective_mismatch'
    when kind in ('nccl_net_error', 'nccl_connection_closed', 'peer_connection_lost', 'nccl_remote_error') then 'transport_failure'
    -- a rank's word that another one failed: Horovod's shutdown names a rank that finished early too
    when kind = 'peer_failure_exception' and text like '%finished execution%' then 'rank_exited_early'
    when kind = 'peer_failure_exception' then 'rank_crashed'
    when kind in ('traceback', 'out_of_memory', 'nccl_cuda_failure', 'cuda_error', 'fatal_python_error', 'slurm_oom_kill',
                  'slurm_memory_limit', 'slurm_job_oom', 'srun_task_signal') then 'rank_crashed'
    when kind in ('gloo_timeout', 'watchdog_timeout', 'watchdog_abort', 'pg_status', 'pg_status_v23', 'heartbeat_monitor',
                  'monitored_barrier_failed', 'desync_lagging_never_joined', 'desync_lagging_not_joined',
                  'desync_lagging_unfinished', 'nccl_ras_dead', 'nccl_ras_timeouts') then 'rank_stalled'
    end as reading
from failing;

-- The kinds the error lines suggest, the most direct first (a mismatch or a transport error
-- names its cause), then the one whose lines come first: in a paste the first error is the
-- cause more often than the tracebacks that follow it.
create or replace temp table error_readings as
select reading, min(ts) as first_at, min(line) as first_line, count(*) as lines,
       row_number() over (order by reading not in ('collective_mismatch', 'transport_failure'),
                                   min(ts) nulls last, min(line), reading) as position
from error_lines where reading is not null group by reading;
