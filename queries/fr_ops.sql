-- Flight Recorder: what each rank issued at each collective seq of each group, in the terms that
-- must agree across ranks. collective_seq_id counts collectives per group (a coalesced group is
-- one seq: its ops and the marker that closes it); p2p entries carry the last collective's value
-- without being one, so they are left out here (fr_p2p.sql pairs them).
-- What must agree (PyTorch's own matching, torch/distributed/flight_recorder/components/types.py):
--   all_to_all: op and dtypes, not sizes (uneven splits are legal; fr_collectives.sql checks totals);
--   scatter: op, output sizes and dtypes (only the root has an input list);
--   gather: op, input sizes and dtypes (only the root has an output list);
--   any other: op, input and output sizes, dtypes; a coalesced group: the multiset of its ops.
-- TorchComms numbers every op of a process, of every communicator and p2p ones too, from one
-- counter (and names send/recv without peers): a rank's values then never repeat, where c10d's
-- repeat across groups (each counts from 1; unless a ring buffer dropped the start) and for p2p
-- entries. Such a dump's collectives are compared by their order in the group.
create or replace temp table fr_numbering as
select e.rank,
       count(*) = count(distinct e.collective_seq_id)
       and (bool_or(e.fr_op in ('send', 'recv') and e.local_src is null)
            or count(distinct g.gkey) > 1 and not any_value(p.evicted)) as per_process
from fr_entries e join fr_entry_group g using (file, line) join fr_dump_of_rank p on p.rank = e.rank
where not e.marker and e.collective_seq_id is not null
group by e.rank;

create or replace temp table fr_coll as
with c as (
    select e.* replace (case when n.per_process
                             then dense_rank() over (partition by e.rank, g.gkey, n.per_process order by e.collective_seq_id)
                             else e.collective_seq_id end as collective_seq_id),
           e.collective_seq_id as printed_seq, g.gkey,
           case when regexp_matches(e.fr_op, '^all_?to_?all') then 'alltoall'
                when e.fr_op = 'scatter' then 'scatter' when e.fr_op = 'gather' then 'gather' else 'coll' end as cls
    from fr_entries e join fr_entry_group g using (file, line) join fr_numbering n on n.rank = e.rank
    where not e.is_p2p and e.collective_seq_id is not null
), k as (
    select *, case cls
        when 'alltoall' then concat_ws('|', fr_op, in_dtypes, out_dtypes)
        when 'scatter' then concat_ws('|', fr_op, out_sizes, out_dtypes)
        when 'gather' then concat_ws('|', fr_op, in_sizes, in_dtypes)
        else concat_ws('|', fr_op, in_sizes, out_sizes, in_dtypes, out_dtypes) end as sig
    from c
)
select gkey, rank, collective_seq_id as seq, cast(min(printed_seq) as varchar) as seq_printed,
       min(file) as file, min(line) as line, any_value(host) as host,
       count(*) filter (where not marker) as ops,
       -- shown as: the marker's op for a coalesced group, else the op itself
       coalesce(min(op) filter (where marker),
                case when count(distinct op) filter (where not marker) = 1 then min(op) filter (where not marker) end,
                'COALESCED') as op,
       coalesce(string_agg(sig, ';' order by sig) filter (where not marker), min(fr_op)) as sig,
       case when count(distinct cls) filter (where not marker) = 1 then min(cls) filter (where not marker) else 'coll' end as cls,
       sum(in_numel) filter (where not marker) as in_numel, sum(out_numel) filter (where not marker) as out_numel,
       string_agg(distinct in_dtypes, ',' order by in_dtypes) filter (where not marker) as in_dtypes,
       string_agg(distinct out_dtypes, ',' order by out_dtypes) filter (where not marker) as out_dtypes,
       -- the least advanced state of its entries
       case when bool_or(state = 'scheduled') then 'scheduled' when bool_or(state = 'started') then 'started'
            when bool_and(state = 'completed') then 'completed' end as state,
       bool_and(coalesce(retired, false)) as retired,
       min(timeout_ms) as timeout_ms, min(ts) as ts, min(record_id) as record_id
from k group by gkey, rank, collective_seq_id;

-- Ring-buffer eviction: a rank's dump keeps its newest entries only, so of each group it holds the
-- seqs from some first one on (the first possibly in part, when a coalesced group was cut). Seqs
-- before the latest such start across ranks are not held by every rank: not compared. (PyTorch
-- aligns the dumps at the latest first record_id; record_ids count every group of a process,
-- seqs count one group, which is what ranks share.)
create or replace temp table fr_cut as
select c.gkey, max(c.first_seq + case when p.evicted then 1 else 0 end) as cut
from (select gkey, rank, min(seq) as first_seq from fr_coll group by gkey, rank) c
join fr_dump_of_rank p using (rank)
group by c.gkey;
