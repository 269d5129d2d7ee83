-- The fingerprints a DETAIL mismatch report quotes are collectives the ranks issued: rank a's
-- own and, at the same SequenceNumber, rank b's. As collectives rows (counter detail_seq, the
-- 0-based SequenceNumber as printed) they show where and how the ranks diverged even when no
-- `Running collective` line was logged. A rank already logged at that seq keeps its own row.
-- The reports whose other side is at SequenceNumber=0 where the reporter's is later: the monitored
-- barrier's own REDUCE/GATHER, which torch 2.1-2.13 print when that rank sits in another call. No
-- collective of that rank (here), but a vote that it differs (mismatch_votes.sql).
-- at_seq: the reporter's seq, where that rank sat in another call (+1: as seq_rows numbers detail_seq).
create or replace temp view barrier_fingerprints as
select file, line, rank_b, cast(regexp_extract(fp_a, 'SequenceNumber=(\d+)', 1) as bigint) + 1 as at_seq from mismatches
where what = 'detail_fingerprint'
  and regexp_extract(fp_b, 'SequenceNumber=(\d+)', 1) = '0' and regexp_extract(fp_a, 'SequenceNumber=(\d+)', 1) <> '0';

create or replace temp table fingerprint_rows as
with quoted as (
    select file, line, host, pid, rank_a as rank, fp_a as fp, ts from mismatches where what = 'detail_fingerprint'
    union all
    select file, line, host, pid, rank_b, fp_b, ts from mismatches m where what = 'detail_fingerprint'
      and not exists (select 1 from barrier_fingerprints b where b.file = m.file and b.line = m.line)
)
select file, line, host, pid, rank,
       cast(regexp_extract(fp, 'SequenceNumber=(\d+)', 1) as bigint) as seq,
       regexp_extract(fp, 'OpType=(\w+)', 1) as op,
       nullif(regexp_extract(fp, 'TensorShape=\[([^\]]*)\]', 1), '') as shape,
       nullif(regexp_extract(fp, 'TensorDtypes=(\w+)', 1), '') as dtype, ts
from quoted
where rank is not null and regexp_matches(fp, 'SequenceNumber=\d+') and regexp_matches(fp, 'OpType=\w+');

insert into collectives (file, line, host, pid, rank, pg, counter, seq, op, dtype, state, ts, shape)
select any_value(file), any_value(line), any_value(host), any_value(pid), rank, '0', 'detail_seq', seq,
       any_value(op), any_value(dtype), 'issued', any_value(ts), any_value(shape)
from fingerprint_rows f
where not exists (select 1 from collectives c where c.counter = 'detail_seq' and c.rank = f.rank and c.seq = f.seq)
group by rank, seq;
