-- The Flight Recorder rows of `collectives`, as the matching sees them: one row per rank, group
-- and collective seq (a coalesced group is one), the group named as every rank names it, and the
-- op, size and dtype that must agree (none for all_to_all sizes, the outputs of a scatter, the
-- inputs of a gather). Two ranks get the same values exactly when their entries match, so the
-- queries over every counter (last_seq, first_stalled, divergence) read FR with its own semantics.
-- Seqs before the eviction cut are dropped, but for a rank's last one (how far it got). p2p rows
-- go: their seqs are per rank (fr_p2p.sql pairs them); so do the dumps' pg_status rows (keyed by
-- process-local pg_id, and gloo counts p2p ops in them).
delete from collectives where file in (select file from fr_dumps);
delete from pg_status where file in (select file from fr_dumps);

insert into collectives (file, line, host, rank, pg, counter, seq, op, numel_in, numel_out, dtype, state, timeout_ms, ts)
with c as (
    select c.*, g.pg, u.cut,
           case c.cls when 'alltoall' then null when 'scatter' then c.out_numel else c.in_numel end as numel,
           case c.cls when 'scatter' then c.out_dtypes else coalesce(c.in_dtypes, c.out_dtypes) end as dtype,
           max(c.seq) over (partition by c.gkey, c.rank) as last_seq
    from fr_coll c join fr_group g using (gkey) join fr_cut u using (gkey)
), k as (   -- different signatures that the op, size and dtype alone would not tell apart
    select *, count(distinct sig) over (partition by gkey, seq, op, numel, dtype) as alike,
              dense_rank() over (partition by gkey, seq order by sig) as variant
    from c
)
select file, line, host, rank, pg, 'fr_seq', seq, op, numel, out_numel,
       case when alike > 1 then coalesce(dtype, '') || ' (variant ' || variant || ')' else dtype end,
       state, timeout_ms, ts
from k where seq >= cut or seq = last_seq;
