-- torch 2.4+ prints a timed-out work under the work's own prefix, `[Rank r] Watchdog caught
-- collective operation timeout: WorkNCCL(SeqNum=S, ...)`, which names no process group, and then
-- the group's, `[PG ID p PG GUID g Rank r] failure detected by watchdog at work sequence id: S`:
-- the timeout is group p's SeqNum S, not the default group's (a subgroup's seq of 1214 read as
-- the default group's would put every rank far past one that only issued the default group's 57).
update collectives c set pg = s.pg
from (select file, rank, seq, min(pg) as pg from pg_status
      where seq is not null and pg is not null and rank is not null
      group by file, rank, seq having count(distinct pg) = 1) s
where c.pg is null and c.counter = 'pg_seq' and c.state = 'timeout'
  and s.file = c.file and s.rank = c.rank and s.seq = c.seq;
