-- The collective call each rank's first error came out of: the outermost frame in
-- torch.distributed's distributed_c10d.py of its earliest traceback (the API the program called:
-- all_reduce, broadcast, barrier...). Ranks that wait for each other sit in the same call; a
-- rank that skipped, added or reordered a collective sits in another one. Plain gloo logs have
-- no sequence numbers, but their tracebacks still say this.
create or replace temp table blocked_calls as
select rank, arg_min(regexp_extract(text, ', in (\w+)\s*$', 1), (coalesce(ts, timestamp '2999-01-01'), file, line)) as call,
       arg_min(file, (coalesce(ts, timestamp '2999-01-01'), file, line)) as file,
       arg_min(line, (coalesce(ts, timestamp '2999-01-01'), file, line)) as line
from events
where kind = 'traceback_frame' and rank is not null and regexp_matches(text, 'distributed_c10d\.py", line \d+, in \w+')
group by rank;

-- The ranks in the call fewer ranks sit in, when exactly two calls split the ranks and the
-- larger side has at least two: a majority waiting together and the odd ones out.
create or replace temp table call_minority as
with calls as (select call, list(rank order by rank) as ranks, count(*) as n from blocked_calls group by call)
select unnest(c.ranks) as rank, c.call, (select call from calls order by n desc limit 1) as majority_call
from calls c
where (select count(*) from calls) = 2 and c.n < (select max(n) from calls) and (select max(n) from calls) >= 2;
