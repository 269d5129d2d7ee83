-- Mismatches the runtime named (DDP parameter counts, DETAIL fingerprints): every report gives
-- two (rank, value) pairs; the value most ranks hold is the norm, the ranks that differ are culprits.
-- Each DETAIL report gives the reporting rank's own fingerprint (always a vote) and another
-- rank's; the other side counts only at the same SequenceNumber (torch 2.13 sometimes prints the
-- monitored barrier's own GATHER/REDUCE at 0 there, which says nothing about the divergence).
create or replace temp table mismatch_votes as
with reports as (
    select what, rank_a, rank_b, n_a, n_b, fp_a, fp_b,
           regexp_extract(fp_a, 'SequenceNumber=(\d+)', 1) as seq_a, regexp_extract(fp_b, 'SequenceNumber=(\d+)', 1) as seq_b
    from mismatches
)
select distinct what, rank, value from (
    select what, rank_a as rank, coalesce(cast(n_a as varchar), regexp_replace(fp_a, 'SequenceNumber=\d+,? ?', '')) as value
    from reports
    union all
    select what, rank_b, coalesce(cast(n_b as varchar), regexp_replace(fp_b, 'SequenceNumber=\d+,? ?', ''))
    from reports where seq_a is not distinct from seq_b
) where rank is not null;

create or replace temp table mismatch_minority as
with counts as (
    select what, value, count(distinct rank) as n from mismatch_votes group by what, value
), norm as (
    select what, arg_max(value, n) as value, max(n) as n, count(*) as values_seen,
           sum(n) as ranks from counts group by what
)
select v.what, v.rank, v.value, n.value as norm
from mismatch_votes v join norm n using (what)
where v.value <> n.value
  -- a norm needs a majority: with two ranks (or a tie) nobody is the odd one out
  and n.n * 2 > n.ranks;
