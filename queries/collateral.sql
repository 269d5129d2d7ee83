-- What other ranks and systems did: timeouts, lost peers, aborts, the launcher's and the
-- scheduler's reactions. The first occurrence per (rank, kind), aligned time; of lines at the same
-- time the first in the file (one row: its file, line and text cite the same line, every run).
create or replace temp table collateral as
select rank, kind, aligned_ts as time, file, line, text
from timeline_events
where kind in (
    -- other ranks: waiting, losing their peer, aborting
    'gloo_timeout', 'watchdog_timeout', 'peer_connection_lost', 'nccl_connection_closed', 'nccl_net_error',
    'watchdog_abort', 'gloo_size_mismatch', 'terminate_called', 'dump_signal', 'pg_status', 'pg_status_v23',
    'monitored_barrier_peer_error', 'fatal_python_error', 'sglang_load_barrier_timeout',
    -- the launcher: failed workers, the SIGTERMs it sent, its "Root Cause"
    'torchelastic_worker_exit', 'torchelastic_worker_signaled', 'torchelastic_closing_worker',
    'torchelastic_death_signal', 'torchelastic_summary',
    -- mpirun: the first process to exit non-zero, the one it saw die of a signal, the abort
    'mpirun_process_name', 'mpirun_signaled', 'mpirun_job_aborted',
    -- the scheduler: task exits, cancellations, time limits, memory kills
    'srun_task_exit', 'srun_task_signal', 'srun_step_end', 'slurm_cancelled', 'slurm_step_failed',
    'slurm_task_signal', 'slurmctld_time_limit', 'slurm_memory_limit', 'slurm_job_memory_limit', 'slurm_oom_kill',
    'slurm_kill_job', 'k8s_terminated_reason', 'k8s_pytorchjob_failed', 'k8s_jobset_failed')
qualify row_number() over (partition by rank, kind order by aligned_ts nulls last, file, line) = 1;
