-- Flight Recorder point-to-point ops, paired across ranks. A send and a recv are not two ranks
-- disagreeing: `send 1->2` on rank 1 is matched by `recv 2<-1` on rank 2 (names carry
-- group-local ranks; pg_config maps them to global ones). Between one sender and one receiver in
-- one group, messages match in the order they were posted: the k-th send from a to b is the k-th
-- recv on b from a (p2p_seq_id orders each rank's own ops; it is per rank, so the pair's values
-- differ). Ops inside a coalesced group (batch_isend_irecv) share one p2p_seq_id and pair the same
-- way; the `coalesced` marker is no message.
create or replace temp table fr_p2p_ops as
with e as (
    select e.*, g.gkey, grp.pg, grp.members, grp.members_known, grp.members_known or grp.is_default as mapped, grp.is_default
    from fr_entries e join fr_entry_group g using (file, line) join fr_group grp using (gkey)
    where e.is_p2p and not e.marker and e.fr_op in ('send', 'recv')
)
select gkey, pg, rank, p2p_seq_id as seq, cast(p2p_seq_id as varchar) as seq_printed, fr_op as kind, op,
       file, line, state, in_numel, out_numel, in_dtypes, out_dtypes,
       -- the rank itself is one side; the other from the name (in the default group without
       -- pg_config, local ranks are global ones)
       case when fr_op = 'send' then rank
            when members_known then members[local_src + 1] when is_default then local_src end as src,
       case when fr_op = 'recv' then rank
            when members_known then members[local_dst + 1] when is_default then local_dst end as dst
from e
where local_src is not null and mapped;

-- Channels neither side of which left a dump whose ring buffer dropped entries (it lost the start
-- of the count). A side with no dump at all posted nothing we know of.
create or replace temp table fr_p2p_k as
select o.*, row_number() over (partition by gkey, src, dst, kind order by seq, line) as k
from fr_p2p_ops o
where o.src is not null and o.dst is not null and o.src <> o.dst
  and not exists (select 1 from fr_dump_of_rank p where p.rank in (o.src, o.dst) and p.evicted);

-- Every op with its counterpart, or none. owner: the rank that posted it; peer: the other side.
create or replace temp table fr_p2p_pairs as
select coalesce(s.gkey, r.gkey) as gkey, coalesce(s.pg, r.pg) as pg,
       coalesce(s.src, r.src) as src, coalesce(s.dst, r.dst) as dst, coalesce(s.k, r.k) as k,
       s.rank as send_rank, s.seq as send_seq, s.seq_printed as send_printed, s.op as send_op, s.state as send_state,
       s.in_numel as send_numel, s.in_dtypes as send_dtypes,
       r.rank as recv_rank, r.seq as recv_seq, r.seq_printed as recv_printed, r.op as recv_op, r.state as recv_state,
       r.out_numel as recv_numel, r.out_dtypes as recv_dtypes
from (select * from fr_p2p_k where kind = 'send') s
full join (select * from fr_p2p_k where kind = 'recv') r
  on r.gkey = s.gkey and r.src = s.src and r.dst = s.dst and r.k = s.k;

create or replace temp table fr_p2p_unmatched as
select p.gkey, p.pg, p.src, p.dst, p.k,
       coalesce(p.send_rank, p.recv_rank) as owner, case when p.send_rank is null then p.src else p.dst end as peer,
       coalesce(p.send_seq, p.recv_seq) as seq, coalesce(p.send_printed, p.recv_printed) as seq_printed,
       coalesce(p.send_op, p.recv_op) as op, coalesce(p.send_state, p.recv_state) as state,
       -- has the peer ever posted the other side of this channel?
       exists (select 1 from fr_p2p_k o where o.gkey = p.gkey and o.src = p.src and o.dst = p.dst
                 and o.kind = case when p.send_rank is null then 'send' else 'recv' end) as channel_used
from fr_p2p_pairs p
where p.send_rank is null or p.recv_rank is null;

-- Each rank's first unmatched op: what it waits in.
create or replace temp table fr_p2p_waits as
select * from fr_p2p_unmatched
qualify row_number() over (partition by owner order by seq, k, gkey, src, dst) = 1;

-- Ranks inside a p2p op of their own: one whose kernel started and never completed, matched or
-- not (a matched one waits for a peer whose side is still queued, or that hangs in it too).
create or replace temp table fr_p2p_inside as
select distinct rank from fr_p2p_ops where state = 'started';

-- Posted pairs whose one side started and waits while the other's never started, the latter on a
-- rank that waits in no p2p op of its own.
create or replace temp table fr_p2p_behind as
select p.gkey,
       case when p.send_state = 'scheduled' then p.send_rank else p.recv_rank end as rank,
       case when p.send_state = 'scheduled' then p.recv_rank else p.send_rank end as peer,
       case when p.send_state = 'scheduled' then p.send_seq else p.recv_seq end as seq,
       case when p.send_state = 'scheduled' then p.send_printed else p.recv_printed end as seq_printed,
       case when p.send_state = 'scheduled' then p.send_op else p.recv_op end as op
from fr_p2p_pairs p
where p.send_rank is not null and p.recv_rank is not null
  and ((p.send_state = 'scheduled' and p.recv_state = 'started') or (p.recv_state = 'scheduled' and p.send_state = 'started'))
  and (case when p.send_state = 'scheduled' then p.send_rank else p.recv_rank end) not in (select rank from fr_p2p_inside);

-- The findings:
--   wrong peer: a rank waits on a peer that never talks to it on that channel, while another rank
--     waits on it on a channel it always served: it sent to / received from the wrong rank;
--   unposted: a rank waits on a peer that waits in no p2p op of its own: the peer never posted its
--     side (it stopped, or sits elsewhere);
--   state behind: a send and its recv were both posted, one side's kernel started and waits, the
--     other's never started (`scheduled`: its stream is stuck behind earlier work) and that rank
--     waits in no p2p op of its own: it is the one that stopped, the ranks waiting on it (and
--     those waiting on them) are victims;
--   size: a send and its recv disagree on the elements or the dtype.
create or replace temp table fr_p2p_findings as
select w.gkey, 'p2p_wrong_peer' as finding, w.owner, w.peer, w.seq, w.seq_printed, w.op, [w.owner] as culprits
from fr_p2p_waits w
where not w.channel_used and w.peer in (select rank from fr_dump_of_rank)
  and exists (select 1 from fr_p2p_waits o where o.peer = w.owner and o.owner <> w.owner and o.channel_used)
union all
select w.gkey, 'p2p_unposted', w.owner, w.peer, w.seq, w.seq_printed, w.op, [w.peer]
from fr_p2p_waits w
where w.peer not in (select owner from fr_p2p_waits) and w.peer not in (select rank from fr_p2p_inside)
  and not exists (select 1 from fr_p2p_waits o where not o.channel_used and o.peer in (select rank from fr_dump_of_rank)
                    and exists (select 1 from fr_p2p_waits x where x.peer = o.owner and x.owner <> o.owner and x.channel_used))
union all
select b.gkey, 'p2p_state_behind', b.rank, b.peer, b.seq, b.seq_printed, b.op,
       (select list(distinct x.rank order by x.rank) from fr_p2p_behind x where x.gkey = b.gkey)
from fr_p2p_behind b
qualify row_number() over (partition by b.gkey order by b.seq, b.rank) = 1
union all
select gkey, 'p2p_size', send_rank, recv_rank, send_seq, send_printed, send_op, list_sort([send_rank, recv_rank])
from fr_p2p_pairs
where send_rank is not null and recv_rank is not null
  and (send_numel is distinct from recv_numel or send_dtypes is distinct from recv_dtypes);
