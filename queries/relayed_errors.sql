-- An error a launcher's console prints without a rank, before the agent says which worker failed
-- (`failed (exitcode: 1) local_rank: 0 (pid: 48821)`, whose pid its failure table gives a rank),
-- is that worker's: torchrun relays a worker's output, then reports it. The nearest such report
-- after the error in the same file names it.
update events e set rank = r.rank from (
    select e.file, e.line,
           (select x.rank from exits x
            where x.file = e.file and x.line > e.line and x.rank is not null
              and x.source = 'torchelastic' and x.reason = 'worker_failed'
            order by x.line limit 1) as rank
    from events e
    where e.rank is null and e.kind in ('traceback', 'out_of_memory', 'cuda_error', 'nccl_cuda_failure', 'fatal_python_error')
) r
where e.file = r.file and e.line = r.line and r.rank is not null;
