-- The first collective where ranks disagree: per (pg, counter, seq), ranks grouped by what they
-- issued (op, numel, dtype); a seq that some ranks issued and others never did also diverges.
-- PyTorch's counters may say one seq twice per rank (DETAIL and the watchdog), one of them
-- without op: one row per rank first. NCCL's COLL rows (millions) are whole and said once per
-- rank (a tee'd copy is the same row), so they are grouped directly: grouping by (seq, rank)
-- first would cost seconds on a 1 GB log. NCCL's point-to-point Send/Recv lines are left out: one
-- grouped call (an all_to_all, a pipeline stage) logs many of them under one opCount, each to its
-- own peer with its own count, so they differ between ranks by design.
-- A rank that wrote lines of its own (beyond NCCL's start-up chatter) but no counter was alive
-- and not in the collective, and so
-- is one the runtime names as never having joined it (desync report, monitored barrier, the FR
-- analyzer's missing ranks), in the PG it names; a rank whose logs are missing (known only from
-- the world size) may have issued it: nobody can say.
-- NCCL's own INFO lines are start-up chatter: they say a process existed, not where it was at the hang.
create or replace temp table speaking_ranks as
select distinct '0' as pg, rank from events where rank is not null and source <> 'nccl'
union
-- a start-up line of its own that the script printed (`Process rank: 0, device: cuda:0`)
select distinct '0', rank from processes where rank is not null and source = 'app'
union
-- one torchrun agent's own console, where some rank's lines are and whose workers are the whole
-- job (queries/world.sql: agent_workers): every worker's output goes there, so a rank that
-- printed no counter there printed none
select distinct '0', rank from world
where (select count(*) from world) <= (select max(n) from agent_workers)
  and exists (select 1 from events e where e.rank is not null and e.source <> 'nccl'
              and e.file in (select file from events where source = 'torchelastic'))
union
-- the DeepSpeed launcher's console on one node: every local worker's output goes there too
select distinct '0', rank from world
where (select count(*) from world) <= (select max(cast(regexp_extract(text, 'num_local_procs=(\d+)', 1) as bigint))
                                         from events where kind = 'deepspeed_node_layout' and regexp_matches(text, '\bnnodes=1\b'))
  and exists (select 1 from events e where e.rank is not null and e.source <> 'nccl'
              and e.file in (select file from events where kind = 'deepspeed_node_layout'))
union
select distinct coalesce(pg, '0'), named from desync_named
where verdict in ('never_joined', 'not_joined', 'monitored_barrier')
union
-- a group whose every member seen has its global rank for its group rank, up to the world's
-- last: the whole world under another id (torch 2.4+ numbers a subgroup of every rank apart from
-- the default group), so every rank that spoke is one of its members
select g.pg, s.rank from (
    select pg from pg_status where pg is not null and pg <> '0' and pg_rank is not null and rank is not null
    group by pg having bool_and(pg_rank = rank) and max(pg_rank) = (select max(rank) from world)
) g, (select distinct rank from events where rank is not null and source <> 'nccl') s;

create or replace temp table issued as
select pg, counter, seq, rank, any_value(op) as op, any_value(numel_in) as numel, any_value(dtype) as dtype
from seq_rows where state in ('issued', 'timeout', 'scheduled', 'started', 'completed') and counter <> 'nccl_opcount'
group by pg, counter, seq, rank;

create or replace temp table seq_groups as
select pg, counter, seq, op, numel, dtype, list(rank order by rank) as ranks, count(*) as n
from issued group by pg, counter, seq, op, numel, dtype
union all
select pg, counter, seq, op, numel, dtype, ranks, len(ranks) as n from (
    select pg, counter, seq, op, numel_in as numel, dtype, list_sort(list_distinct(list(rank))) as ranks
    from seq_rows where counter = 'nccl_opcount' and op not in ('SEND', 'RECV')
    group by pg, counter, seq, op, numel_in, dtype);

-- Most ranks stand in one seq and the others further on: the ranks past it did not issue that seq
-- as the majority did (a collective of the whole PG completes for every rank or for none), so it
-- is where they diverged; what the ranks past it issued there is not in the logs.
create or replace temp table sequence_ahead as
select pg, counter, min(seq) as seq, list(rank order by rank) filter (where seq > lowest) as ranks from (
    select *, min(seq) over (partition by pg, counter) as lowest from standing)
group by pg, counter
having max(seq) > min(seq) and 2 * count(*) filter (where seq = lowest) > count(*);

-- A rank that issued as many collectives as any other but waits in a seq which every other rank
-- that reports its PG status had completed: a collective the others finished without it (NCCL
-- lets the receivers of a smaller all_gather complete while the rank that handed a larger tensor
-- waits for the rest). One that issued fewer is behind them (last_seq.sql), not left in one.
create or replace temp table left_in_completed as
select s.pg, s.counter, s.rank, s.seq from standing s
join last_seq l using (pg, counter, rank)
where s.counter = 'pg_seq'
  and exists (select 1 from pg_status p where p.pg = s.pg and p.rank <> s.rank)
  and not exists (select 1 from pg_status p where p.pg = s.pg and p.rank <> s.rank
                  and coalesce(p.last_completed, -1) < s.seq)
  and not exists (select 1 from last_seq o where o.pg = s.pg and o.counter = s.counter and o.rank <> s.rank
                  and o.last_seq > l.last_seq);

create or replace temp table divergence_all as
with split as (  -- seqs where ranks issued different things
    select pg, counter, seq from seq_groups group by pg, counter, seq having count(*) > 1
), behind as (  -- the seq after the lowest last seq of a rank that may be behind, when others went further
    select b.pg, b.counter, min(b.last_seq) + 1 as seq from may_be_behind b
    join (select pg, counter, max(last_seq) as max_seq from last_seq group by pg, counter) g using (pg, counter)
    group by b.pg, b.counter having max(g.max_seq) > min(b.last_seq)
), silent as (  -- speaking ranks of a PG with no row at all in it: the seq the others waited in
               -- (timed out in, or saw fail as its peer went away: NCCL's remote error)
    select s.pg, s.counter, min(s.seq) as seq from seq_rows s
    where (s.state = 'timeout'
           or exists (select 1 from events e where e.file = s.file and e.line = s.line and e.kind = 'nccl_remote_error'))
      and exists (select 1 from speaking_ranks w where w.pg = s.pg
                  and w.rank not in (select rank from last_seq l where l.pg = s.pg and l.counter = s.counter))
    group by s.pg, s.counter
), checked as (  -- every rank issued the same last collective, and the runtime says what they exchanged
                -- in it differs (DDP's parameter check all-gathers every rank's shapes, then compares)
    select l.pg, l.counter, max(l.last_seq) as seq from last_seq l
    where exists (select 1 from mismatches where what = 'ddp_params') and l.pg = '0'
    group by l.pg, l.counter having count(distinct l.last_seq) = 1 and count(*) >= 2
), apart as (  -- ranks that timed out waiting in different seqs of one PG (each in one): the seq
              -- after the lowest, which the ranks that waited there never issued
    select pg, counter, min(seq) + 1 as seq from (
        select s.pg, s.counter, s.rank, min(s.seq) as seq from seq_rows s
        where s.state = 'timeout'
        group by s.pg, s.counter, s.rank having count(distinct s.seq) = 1
           -- and nothing it issued after it (NCCL enqueues ahead of completion)
           and min(s.seq) = (select l.last_seq from last_seq l where l.pg = s.pg and l.counter = s.counter and l.rank = s.rank)
    ) group by pg, counter having count(distinct seq) > 1
), fingerprinted as (  -- a DETAIL report's other side that sat in another call at the reporter's
                      -- seq (its fingerprint the monitored barrier's own: mismatch_rows.sql)
    select '0' as pg, 'detail_seq' as counter, min(at_seq) as seq from barrier_fingerprints
    where rank_b is not null having count(*) > 0
), left_in as (  -- ranks that wait in a seq every other rank's PG status says it completed: the
                -- seq they diverged at (what they issued there differs, or their side never ran)
    select pg, counter, min(seq) as seq from left_in_completed group by pg, counter
), missing as (select * from behind union all select * from silent union all select * from checked
               union all select * from apart union all select pg, counter, seq from sequence_ahead
               union all select * from left_in union all select * from fingerprinted)
select pg, counter, min(seq) as seq, arg_min(kind = 'split', seq) as split,
       (select count(distinct rank) from last_seq l where l.pg = d.pg and l.counter = d.counter) as coverage
from (
    select *, 'split' as kind from split union all select *, 'missing' from missing
) d
-- a timeout that printed no number (1.x watchdog lines: an op, no SeqNum) places no divergence
where seq is not null
group by pg, counter;

-- The one to report: a disagreement on what was issued says more than a rank missing; then the
-- counter most ranks report (watchdog SeqNums come only from ranks whose watchdog fired); then
-- PyTorch's SeqNum first, then Flight Recorder, DETAIL, NCCL opCount.
create or replace temp table divergence as
select * exclude (coverage) from divergence_all
order by split desc, coverage desc,
         case counter when 'pg_seq' then 0 when 'fr_seq' then 1 when 'detail_seq' then 2 else 3 end, seq
limit 1;

-- A split no majority decides where rank 0 stands alone with another op than the other side (two
-- ranks: one each): the main process's own path (a rank-0-only evaluation, checkpoint or logging
-- branch) is where such splits come from. Not where the earlier seqs show both ops already: two
-- ops the program issues every step, swapped on one side, say nothing of which side erred.
create or replace temp table main_process_split as
with at_split as (
    select g.*, upper(replace(g.op, '_', '')) as name from seq_groups g join divergence d using (pg, counter, seq)
    where d.split
), history as (
    select distinct upper(replace(h.op, '_', '')) as name
    from seq_groups h join divergence d using (pg, counter) where h.seq < d.seq and h.op is not null
)
select 0 as rank, any_value(op) filter (where ranks = [0]) as op, any_value(op) filter (where ranks <> [0]) as others_op
from at_split
having count(*) = 2 and count(distinct name) = 2 and min(n) = max(n) and bool_or(ranks = [0])
   and count(*) filter (where name in (select name from history)) < 2;

-- The ranks that stand in a later seq than the divergence and issued nothing there: they went past
-- it, and what they issued there is not in the logs (the report's `ranks_past`, in no group).
create or replace temp table ranks_past as
select s.rank from standing s join divergence d using (pg, counter)
where s.seq > d.seq
  and s.rank not in (select unnest(g.ranks) from seq_groups g where g.pg = d.pg and g.counter = d.counter and g.seq = d.seq);

-- A collective issued by only some ranks shifts every later seq on them: at the first split,
-- one group's op (with size and dtype) is the other group's op at the next seq. When both
-- groups' ops appear crossed at the next seq, the order was swapped: a mismatch, not a shift.
create or replace temp table shifted as
with g as (
    select s.*,
           row_number() over (partition by s.pg, s.counter order by s.n, s.ranks) as small,
           row_number() over (partition by s.pg, s.counter order by s.n desc, s.ranks) as big,
           count(*) over (partition by s.pg, s.counter) as groups
    from seq_groups s join divergence_all d using (pg, counter, seq) where d.split
), pairs as (
    select mi.pg, mi.counter, mi.seq, mi.ranks,
        -- the minority ran ahead (skipped one): its op is the others' next
        exists (select 1 from seq_groups s where s.pg = mi.pg and s.counter = mi.counter and s.seq = mi.seq + 1
                  and list_has_all(s.ranks, ma.ranks) and s.op = mi.op
                  and s.numel is not distinct from mi.numel and s.dtype is not distinct from mi.dtype)
          as ahead_seen,
        -- the others never reached the next seq (the runtime stopped them): the program's own
        -- history says the minority's op is the one that follows the majority's
        (not exists (select 1 from seq_groups s where s.pg = mi.pg and s.counter = mi.counter and s.seq = mi.seq + 1
                          and list_has_all(s.ranks, ma.ranks))
            and exists (select 1 from seq_groups a join seq_groups b
                          on b.pg = a.pg and b.counter = a.counter and b.seq = a.seq + 1 and b.ranks = a.ranks
                        where a.pg = mi.pg and a.counter = mi.counter and a.seq < mi.seq
                          and list_has_all(a.ranks, ma.ranks) and list_has_all(a.ranks, mi.ranks)
                          and a.op = ma.op and a.numel is not distinct from ma.numel and a.dtype is not distinct from ma.dtype
                          and b.op = mi.op and b.numel is not distinct from mi.numel and b.dtype is not distinct from mi.dtype))
          as ahead_by_history,
        -- the minority issued one extra: the others' op comes next on the minority
        exists (select 1 from seq_groups s where s.pg = mi.pg and s.counter = mi.counter and s.seq = mi.seq + 1
                  and list_has_all(s.ranks, mi.ranks) and s.op = ma.op
                  and s.numel is not distinct from ma.numel and s.dtype is not distinct from ma.dtype)
          as extra
    from (select * from g where small = 1 and groups = 2) mi
    join (select * from g where big = 1 and groups = 2) ma using (pg, counter, seq)
)
-- `seen`: the next seq shows the shift; otherwise only the history suggests it, and a swapped
-- pair of ops would look the same.
select pg, counter, seq, unnest(ranks) as rank, ahead_seen or extra as seen
from pairs where (ahead_seen or ahead_by_history) <> extra;
