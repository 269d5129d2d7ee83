-- NCCL RAS reports (parsers/formats/nccl_ras.toml) as the runtime's own word. A rank that has
-- launched fewer operations than the most any rank of its communicator launched (`Rank 517 has
-- launched up to operation 5120` beside `1023 ranks have launched up to operation 5121`; of two
-- ranks, each on its own line) is behind: the others wait in an operation it never launched. A
-- desync row, like PyTorch's `didn't join`. A process the report considers dead, and the ranks it managed
-- (`Rank 42 -- GPU 2 managed by process 30518`), died: an exits row. Communicator ranks are global
-- ranks when the communicator spans the job (the usual world communicator, group #0).

-- The communicator's warning a line of the report is under (`#0-0 (4b9e07d2c18fa365) MISMATCH`).
create or replace temp macro ras_block(f, l) as
    (select max(p.line) from events p where p.file = f and p.kind = 'nccl_ras_comm_problem' and p.line < l);

create or replace temp table ras_rank_lines as
select file, line, kind, ts, ras_block(file, line) as block,
       cast(regexp_extract(text, 'Rank (\d+)', 1) as bigint) as comm_rank,
       try_cast(nullif(regexp_extract(text, 'launched up to operation (\d+)', 1), '') as bigint) as ops,
       try_cast(nullif(regexp_extract(text, 'managed by process (\d+)', 1), '') as bigint) as pid,
       nullif(regexp_extract(text, ' on node (\S+)', 1), '') as host
from events where kind in ('nccl_ras_rank_ops', 'nccl_ras_rank_no_ops', 'nccl_ras_rank');

create or replace temp table ras_launched_most as
select file, block, max(ops) as ops from (
    select file, block, ops from ras_rank_lines
    union all
    select file, ras_block(file, line), try_cast(regexp_extract(text, 'launched up to operation (\d+)', 1) as bigint)
    from events where kind = 'nccl_ras_rank_group'
) group by file, block;

insert into desync (file, line, ranks, verdict, seq, next, ts)
select r.file, r.line, cast(r.comm_rank as varchar), 'not_joined', r.ops, r.ops + 1, r.ts
from ras_rank_lines r join ras_launched_most m on m.file = r.file and m.block is not distinct from r.block
where r.ops is not null and r.ops < m.ops;

insert into exits (file, line, host, pid, rank, reason, source, ts, text)
select r.file, r.line, r.host, r.pid, r.comm_rank, 'process_dead', 'nccl_ras', r.ts,
       'NCCL RAS: process ' || r.pid || ' (rank ' || r.comm_rank || ') considered dead'
from ras_rank_lines r
where r.pid in (select cast(regexp_extract(text, 'Process (\d+)', 1) as bigint) from events e
                where e.kind = 'nccl_ras_process' and e.file = r.file)
  and exists (select 1 from events e where e.kind = 'nccl_ras_dead' and e.file = r.file);

-- The largest communicator the report lists spans the job: its rank count is the world size.
insert into processes (file, line, world_size, source)
select file, line, n, 'nccl_ras' from (
    select file, line, cast(regexp_extract(text, '^\s*\d+\s+\d+\s+\d+\s+\d+(?:-\d+)?\s+(\d+)', 1) as bigint) as n
    from events where kind = 'nccl_ras_comm_group'
) where n is not null
qualify row_number() over (order by n desc, file, line) = 1;
