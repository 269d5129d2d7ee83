-- The first Flight Recorder divergence: of every group's findings (fr_collectives.sql, fr_p2p.sql),
-- a disagreement on what was issued first (it says more than a rank missing), then a rank behind
-- or missing, then kernel state, then a collective every rank timed out in; then the larger group,
-- the earlier seq. With the ops each rank issued there (null: it never issued it).
create or replace temp table fr_divergence_all as
with f as (
    select gkey, finding, 'fr_seq' as counter, seq, culprits, null::bigint as owner, null::bigint as peer,
           null::varchar as p2p_printed, null::varchar as p2p_op
    from fr_coll_findings
    union all
    select gkey, finding, 'fr_p2p_seq', seq, culprits, owner, peer, seq_printed, op from fr_p2p_findings
)
select f.*, g.pg, len(g.members) as size,
       case when f.finding in ('split', 'split_tie', 'order_tie', 'hole', 'alltoall_totals', 'p2p_wrong_peer', 'p2p_size') then 0
            when f.finding in ('behind', 'silent', 'p2p_unposted') then 1
            when f.finding in ('state_behind', 'p2p_state_behind') then 2 else 3 end as priority
from f join fr_group_state g using (gkey);

create or replace temp table fr_divergence as
select * from fr_divergence_all
order by priority, size desc, seq, pg, counter, owner nulls first, finding, gkey
limit 1;

-- Per rank at the divergence: the op it issued there; members that never issued it get none. Of a
-- point-to-point pair, the peer posted its side (the other op) where the sizes differ or only the
-- kernels' states do; where it never posted, none.
create or replace temp table fr_divergence_ops as
select c.rank, c.op, c.in_numel as numel, c.in_dtypes as dtype, c.state, c.sig, c.seq_printed
from fr_divergence d join fr_coll c on c.gkey = d.gkey and c.seq = d.seq
where d.counter = 'fr_seq'
union all
select m.rank, null, null, null, null, null, null
from fr_divergence d join fr_group_state g using (gkey), unnest(g.members) as m(rank)
where d.counter = 'fr_seq' and not exists (select 1 from fr_coll c where c.gkey = d.gkey and c.seq = d.seq and c.rank = m.rank)
union all   -- p2p: the rank waiting and its peer
select owner, p2p_op, null, null, null, null, p2p_printed from fr_divergence where counter = 'fr_p2p_seq'
union all
select peer, case when finding in ('p2p_size', 'p2p_state_behind') then
                    case upper(p2p_op) when 'SEND' then 'RECV' when 'RECV' then 'SEND' end end,
       null, null, null, null, null
from fr_divergence where counter = 'fr_p2p_seq';

-- The report's first_stalled names nobody when every rank reached the same seq; the rank whose
-- kernel never started, or the peer that never posted its side, is the one that stopped.
insert into first_stalled (pg, counter, rank, host, last_seq, last_op, last_seen, file, line, timed_out, max_seq, ranks)
select d.pg, d.counter, r.rank,
       (select any_value(host) from fr_dumps x where x.rank = r.rank),
       case when d.finding = 'state_behind' then d.seq
            else (select max(seq) from fr_p2p_ops o where o.rank = r.rank and o.gkey = d.gkey) end,
       case when d.finding = 'state_behind' then (select any_value(op) from fr_divergence_ops o where o.rank = r.rank) end,
       (select max(ts) from fr_entries e where e.rank = r.rank),
       null, null, false, d.seq, d.size
from fr_divergence d, unnest(d.culprits) as r(rank)
where d.finding in ('state_behind', 'p2p_unposted', 'p2p_state_behind') and r.rank >= 0
  and not exists (select 1 from first_stalled)
qualify row_number() over (order by r.rank) = 1;

-- What the verdict's summary says of it (correlator/verdict.py: fr_* facts).
create or replace temp table fr_facts as
select d.pg as fr_pg, d.counter as fr_counter,
       coalesce((select min(seq_printed) from fr_divergence_ops where seq_printed is not null), cast(d.seq as varchar)) as fr_seq,
       d.owner as fr_owner, d.peer as fr_peer, d.p2p_op as fr_op,
       (select string_agg(distinct op, '/' order by op) from fr_divergence_ops where op is not null) as fr_ops,
       (select in_total from fr_seq s where s.gkey = d.gkey and s.seq = d.seq and d.counter = 'fr_seq') as fr_in_total,
       (select out_total from fr_seq s where s.gkey = d.gkey and s.seq = d.seq and d.counter = 'fr_seq') as fr_out_total
from fr_divergence d;

-- The dump entries behind it, the culprits' first: each rank's entry at the seq (p2p: the waiting
-- op), what a verdict from the FR rules cites.
create or replace temp table fr_evidence as
with lines as (
    select c.rank, c.file, c.line from fr_divergence d join fr_coll c on c.gkey = d.gkey and c.seq = d.seq
    where d.counter = 'fr_seq'
    union all
    select o.rank, o.file, o.line from fr_divergence d join fr_p2p_ops o
      on o.gkey = d.gkey and o.rank = d.owner and o.seq = d.seq
    where d.counter = 'fr_p2p_seq'
)
select l.file, l.line, row_number() over (order by not list_contains(d.culprits, l.rank), l.rank, l.file, l.line) as k
from lines l, fr_divergence d;

-- Whether the dumps can show agreement (the healthy rule reads it): how many ranks dumped, and
-- how many members of their groups did not. One dump, or dumps whose rank is unknown, agree with
-- nothing; a member without a dump may be the one that stopped.
create or replace temp table fr_coverage as
select (select count(*) from fr_dump_of_rank) as dumped,
       (select count(*) from fr_group g, unnest(g.members) as m(r)
        where not exists (select 1 from fr_dump_of_rank d where d.rank = m.r))
       -- a group whose members no pg_config lists is known only by the ranks that dumped it: it
       -- shows agreement only where they are the whole world
       + (select count(*) from fr_group g where not g.members_known
          and len(g.members) < coalesce((select n from world_size), len(g.members) + 1)) as undumped;
