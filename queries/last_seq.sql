-- Per process group, counter and global rank: the last collective the rank issued and how far
-- it got. Counters stay apart: pg_seq (PyTorch SeqNum, 1-based, per PG), detail_seq (DETAIL's
-- 0-based SequenceNumber, shifted +1 here to compare with SeqNum), fr_seq (Flight Recorder
-- collective_seq_id), nccl_opcount (per NCCL communicator; pg = commId).
-- A view: its readers aggregate it as they scan; a table of every COLL row (with its file path)
-- took 0.9 s at 1 GB of logs and 8.7 s at 5 GB, where it spilled.
create or replace temp view seq_rows as
select c.rank, c.host, coalesce(c.pg, '0') as pg, c.counter,
       case when c.counter = 'detail_seq' then c.seq + 1 else c.seq end as seq,
       c.op,
       coalesce(c.numel_in, cast(list_aggregate(list_transform(string_split(c.shape, ','), lambda x: try_cast(trim(x) as bigint)), 'product') as bigint)) as numel_in,
       c.dtype, c.state, c.ts, c.file, c.line
from collectives c where c.counter <> 'nccl_opcount' and c.rank is not null
union all
select c.rank, c.host, coalesce(m.comm_id, c.comm_id, c.pg, c.comm) as pg, c.counter, c.seq, c.op, c.numel_in, c.dtype,
       c.state, c.ts, c.file, c.line
from collectives c left join comms m on m.host = c.host and m.pid = c.pid and m.comm = c.comm and m.phase = 'COMPLETE'
where c.counter = 'nccl_opcount' and c.rank is not null
union all  -- the PG status at detection: the last SeqNum this rank enqueued
select rank, host, pg, 'pg_seq', last_enqueued, null, null, null, 'last_enqueued', ts, file, line
from pg_status where rank is not null and last_enqueued >= 0;

-- The ranks a runtime's report names, one row each: a desync report's or a monitored barrier's
-- laggards, a barrier's silent peer (its `verdict` says which). Read by divergence.sql and rules.
create or replace temp view desync_named as
select d.*, cast(trim(r) as bigint) as named
from desync d, unnest(string_split(d.ranks, ',')) as t(r) where trim(r) <> '';

-- Of rows with the same seq (issued and timed out, tee'd copies), the last in file order cites it:
-- file and line of one row, the same every run.
create or replace temp table last_seq as
select pg, counter, rank, min(host) as host,
       max(seq) as last_seq,
       arg_max(op, (seq, file, line)) as last_op,
       max(ts) as last_seen,
       arg_max(file, (seq, file, line)) as file, arg_max(line, (seq, file, line)) as line,
       bool_or(state = 'timeout') as timed_out
from seq_rows group by pg, counter, rank;

-- Where each rank stands in each PG's sequence, by the counters whose lines say where a rank waits:
-- the SeqNum its watchdog timed out in, else the last it issued (DETAIL's "is running" fingerprint).
-- What was enqueued says what the CPU launched ahead of the GPU, not where the rank waits: the PG
-- status's last enqueued is left out, and so are NCCL's opCount and Flight Recorder's entries (both
-- recorded at enqueue; FR's own matching reads their states, fr_findings.sql).
create or replace temp table standing as
select pg, counter, rank,
       coalesce(min(seq) filter (where state = 'timeout'), max(seq) filter (where state <> 'last_enqueued')) as seq
from seq_rows where counter in ('pg_seq', 'detail_seq')
group by pg, counter, rank
having seq is not null;

-- The ranks that may be behind: a rank whose last row is its watchdog firing in the oldest
-- collective any rank timed out in was waiting in it, not behind it; its watchdog names the
-- collective it waited in, not the last one it enqueued. Unless the others completed the seq it
-- waits in (their PG status says so): then it waits alone in what they finished, behind them.
create or replace temp table may_be_behind as
select l.* from last_seq l
where not (l.timed_out and l.last_seq >= coalesce(
    (select min(seq) from seq_rows s where s.pg = l.pg and s.counter = l.counter and s.state = 'timeout'), l.last_seq + 1))
   or (l.counter = 'pg_seq' and l.timed_out
       and exists (select 1 from pg_status p join standing s on s.pg = l.pg and s.counter = l.counter and s.rank = l.rank
                   where p.pg = l.pg and p.rank <> l.rank and p.last_completed >= s.seq));
