-- A collective the watchdog found failed (ProcessGroupNCCL's WorkNCCL::checkAndSetException):
-- `[Rank r] Collective WorkNCCL(SeqNum=N, OpType=OP, NumelIn=.., NumelOut=.., Timeout(ms)=..) raised
-- the following async exception: <error>`. The line keeps the kind of its error (a peer's remote
-- error, a CUDA error); its collective joins `collectives`: the rank had issued it and was in it.
-- Before apply_identity, which fills the ranks these rows lack as it does the parsed ones'.
insert into collectives (file, line, host, pid, rank, local_rank, pg_rank, counter, seq, op, numel_in, numel_out,
                         state, timeout_ms, ts)
select file, line, host, pid, rank, local_rank,
       try_cast(regexp_extract(text, '\[Rank (\d+)\] +Collective Work', 1) as bigint),
       'pg_seq', cast(regexp_extract(text, 'Work\w*\(SeqNum=(\d+)', 1) as bigint),
       regexp_extract(text, 'Work\w*\(SeqNum=\d+, OpType=(\w+)', 1),
       try_cast(regexp_extract(text, 'NumelIn=(-?\d+)', 1) as bigint),
       try_cast(regexp_extract(text, 'NumelOut=(-?\d+)', 1) as bigint),
       'issued', try_cast(regexp_extract(text, 'Timeout\(ms\)=(\d+)', 1) as bigint), ts
from events
where text like '%raised the following async exception%'
  and regexp_matches(text, 'Collective Work\w*\(SeqNum=\d+, OpType=\w+');
