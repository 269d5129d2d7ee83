-- Mismatches the runtime named (DDP parameter counts, DETAIL fingerprints): every report gives
-- two (rank, value) pairs; the value most ranks hold is the norm, the ranks that differ are culprits.
create or replace temp table mismatch_votes as
select distinct what, rank, value from (
    select what, rank_a as rank, coalesce(cast(n_a as varchar), regexp_replace(fp_a, 'SequenceNumber=\d+, ', '')) as value, file, line from mismatches
    union all
    select what, rank_b, coalesce(cast(n_b as varchar), regexp_replace(fp_b, 'SequenceNumber=\d+, ', '')), file, line from mismatches
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
