-- Flight Recorder collectives matched across ranks, per group and seq (from the eviction cut on):
-- who holds the seq, which signatures they hold, and the findings a group's seqs give.
-- The majority decides: no rank is the reference.
create or replace temp table fr_seq_sigs as
select c.gkey, c.seq, c.sig, list(c.rank order by c.rank) as ranks, count(*) as n
from fr_coll c join fr_cut u using (gkey)
where c.seq >= u.cut
group by c.gkey, c.seq, c.sig;

create or replace temp table fr_seq as
with s as (
    select *, max(n) over (partition by gkey, seq) as top from fr_seq_sigs
), per_seq as (
    select gkey, seq, count(*) as sigs,
           count(*) filter (where n = top) = 1 as has_majority,   -- one signature held by more ranks than any other
           flatten(list(ranks) filter (where n < top)) as minority
    from s group by gkey, seq
)
select p.*, x.holders, x.cls, x.in_total, x.out_total, x.scheduled, x.started, x.completed, x.all_retired, x.min_ts
from per_seq p join (
    select c.gkey, c.seq, list(c.rank order by c.rank) as holders, min(c.cls) as cls,
           sum(c.in_numel) as in_total, sum(c.out_numel) as out_total,
           coalesce(list(c.rank order by c.rank) filter (where c.state = 'scheduled'), []) as scheduled,
           count(*) filter (where c.state = 'started') as started,
           count(*) filter (where c.state = 'completed') as completed,
           bool_and(c.retired) as all_retired, min(c.ts) as min_ts
    from fr_coll c join fr_cut u using (gkey) where c.seq >= u.cut
    group by c.gkey, c.seq
) x using (gkey, seq);

-- Per group: its members, which of them left a dump, how far each got, whether its backend
-- records kernel state (NCCL does; gloo leaves every entry `scheduled`), and the first seq not
-- completed on every rank holding it (a collective completes only once every member joined it).
create or replace temp table fr_group_state as
with m as (   -- the members: pg_config's; for the default group without one, the ranks of the job
    select g.gkey, g.pg, g.members_known, g.is_default,
           case when g.members_known or not g.is_default then g.members
                else (select list(rank order by rank) from world) end as members
    from fr_group g
), u as (
    select m.gkey, r.rank, r.rank in (select rank from fr_dump_of_rank) as dumped,
           exists (select 1 from fr_coll c where c.gkey = m.gkey and c.rank = r.rank) as issued
    from m, unnest(m.members) as r(rank)
)
select m.*,
       coalesce((select list(rank order by rank) from u where u.gkey = m.gkey and dumped), []) as dumped,
       coalesce((select list(rank order by rank) from u where u.gkey = m.gkey and not dumped), []) as undumped,
       -- members with no collective of the group in their dump, or no dump at all
       coalesce((select list(rank order by rank) from u where u.gkey = m.gkey and not issued), []) as silent,
       (select max(seq) from fr_coll c where c.gkey = m.gkey) as max_seq,
       -- the lowest of the members' last seqs: the oldest collective some member still waits in
       (select min(last) from (select max(seq) as last from fr_coll c where c.gkey = m.gkey group by c.rank)) as min_last_seq,
       coalesce((select bool_or(state in ('started', 'completed')) from fr_coll c where c.gkey = m.gkey), false) as has_state,
       (select min(seq) from fr_seq s where s.gkey = m.gkey and len(s.scheduled) + s.started > 0) as pending_seq
from m;

-- all_to_all by totals: the elements sent over all ranks must be the elements received. Uneven
-- splits are legal, so no rank's own sizes are wrong by themselves; where every output (or every
-- input) but a few has one size, those few are the odd ones out, else nobody can be named.
create or replace temp table fr_alltoall_odd as
with sides as (
    select c.gkey, c.seq, c.rank, 'out' as side, c.out_numel as numel from fr_coll c
    union all select c.gkey, c.seq, c.rank, 'in', c.in_numel from fr_coll c
), votes as (
    select gkey, seq, side, numel, list(rank order by rank) as ranks, count(*) as n,
           sum(count(*)) over (partition by gkey, seq, side) as total,
           max(count(*)) over (partition by gkey, seq, side) as top
    from sides group by gkey, seq, side, numel
)
select v.gkey, v.seq, list_sort(list_distinct(flatten(list(v.ranks)))) as ranks
from votes v
where v.n < v.top and v.top * 2 > v.total
  and (select count(*) from votes w where w.gkey = v.gkey and w.seq = v.seq and w.side = v.side and w.n = v.top) = 1
group by v.gkey, v.seq;

-- Where ranks disagree and no majority names the odd ones (two ranks, a tie), the group's own
-- history may: a signature it never issued at any other seq, where the others' it did
-- ('split_tie'); else a step it never took, from the rank's previous op to this one, where the
-- others' step it took before ('order_tie': a skipped or reordered collective).
create or replace temp table fr_tie as
with t as (select gkey, seq from fr_seq where sigs > 1 and not has_majority),
x as (
    select c.gkey, c.seq, c.rank, c.sig,
           exists (select 1 from fr_coll o where o.gkey = c.gkey and o.seq <> c.seq and o.sig = c.sig) as sig_seen,
           exists (select 1 from fr_coll o join fr_coll op on op.gkey = o.gkey and op.rank = o.rank and op.seq = o.seq - 1
                   where o.gkey = c.gkey and o.seq < c.seq and o.sig = c.sig and op.sig = p.sig) as step_seen
    from fr_coll c join t using (gkey, seq)
    left join fr_coll p on p.gkey = c.gkey and p.rank = c.rank and p.seq = c.seq - 1
)
select gkey, seq, 'split_tie' as finding, list(rank order by rank) as ranks from x
where not sig_seen
group by gkey, seq
having exists (select 1 from x y where y.gkey = x.gkey and y.seq = x.seq and y.sig_seen)
union all
select gkey, seq, 'order_tie', list(rank order by rank) from x
where not step_seen
  and not exists (select 1 from x y where y.gkey = x.gkey and y.seq = x.seq and not y.sig_seen)
group by gkey, seq
having exists (select 1 from x y where y.gkey = x.gkey and y.seq = x.seq and y.step_seen);

-- The findings, each at the first seq of its group where it shows. culprits [-1]: none can be named.
create or replace temp table fr_coll_findings as
-- different signatures at one seq: the minority, where there is a majority (else fr_tie's)
select s.gkey, case when s.has_majority then 'split' else coalesce(t.finding, 'split_tie') end as finding, s.seq,
       case when s.has_majority then s.minority else coalesce(t.ranks, [-1]) end as culprits
from fr_seq s left join fr_tie t using (gkey, seq)
where s.sigs > 1
qualify row_number() over (partition by s.gkey order by s.seq) = 1
union all
select s.gkey, 'alltoall_totals', s.seq,
       coalesce((select ranks from fr_alltoall_odd o where o.gkey = s.gkey and o.seq = s.seq), [-1])
from fr_seq s join fr_group_state g using (gkey)
where s.sigs = 1 and s.cls = 'alltoall' and s.in_total <> s.out_total
  and len(s.holders) = len(g.members) and len(g.undumped) = 0
qualify row_number() over (partition by s.gkey order by s.seq) = 1
union all
-- a seq the others hold and a rank skipped, between two it holds (a gap in its own count)
select gkey, 'hole', seq, list(rank order by rank)
from (
    select h.gkey, h.seq, r.rank
    from fr_seq h
    join (select gkey, rank, min(seq) as lo, max(seq) as hi from fr_coll group by gkey, rank) r
      on r.gkey = h.gkey and h.seq > r.lo and h.seq < r.hi and not list_contains(h.holders, r.rank)
)
group by gkey, seq
qualify row_number() over (partition by gkey order by seq) = 1
union all
-- ranks with a dump that never reached a seq the others hold: those that stopped first
select c.gkey, 'behind', min(c.last_seq) + 1, list(c.rank order by c.rank) filter (where c.last_seq = c.lowest)
from (select gkey, rank, max(seq) as last_seq, min(max(seq)) over (partition by gkey) as lowest
      from fr_coll group by gkey, rank) c
join fr_group_state g using (gkey)
where c.last_seq < g.max_seq
group by c.gkey
union all
-- members that show no collective of the group (no dump at all, most often): the seq the others
-- wait in (the first not completed everywhere; without kernel state, the oldest one a member still
-- holds last: gloo leaves every entry `scheduled`, and a member whose peer never came waits in it
-- while another, served by the root of a broadcast, may have gone one further)
select gkey, 'silent', case when has_state then coalesce(pending_seq, max_seq) else min_last_seq end, silent
from fr_group_state where len(silent) > 0 and max_seq is not null
union all
-- every rank holds the seq and the same op, some started it, some did not even start it:
-- those are behind (their stream was busy); the others wait in it
select s.gkey, 'state_behind', s.seq, s.scheduled
from fr_seq s join fr_group_state g on g.gkey = s.gkey and g.pending_seq = s.seq
where g.has_state and s.sigs = 1 and len(s.scheduled) > 0 and s.started > 0 and s.completed = 0
union all
-- every member started the same op, none completed, the watchdog retired all of them: they all
-- timed out inside it, nobody behind or different
select s.gkey, 'timed_out', s.seq, [-1]
from fr_seq s join fr_group_state g on g.gkey = s.gkey and g.pending_seq = s.seq
where g.has_state and s.sigs = 1 and len(s.scheduled) = 0 and s.completed = 0 and s.all_retired
  and len(s.holders) = len(g.members) and len(g.undumped) = 0;
