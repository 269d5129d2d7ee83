-- Mismatches the runtime named (DDP parameter counts, DETAIL fingerprints): every report gives
-- two (rank, value) pairs; the value most ranks hold is the norm, the ranks that differ are culprits.
-- Each DETAIL report gives the reporting rank's own fingerprint (always a vote) and another
-- rank's; the other side counts only at the same SequenceNumber (torch 2.1-2.13 print the monitored
-- barrier's own GATHER/REDUCE at 0 there when that rank is in another call: a vote that it differs).
create or replace temp table mismatch_votes as
with reports as (
    select what, rank_a, rank_b, n_a, n_b, fp_a, fp_b,
           regexp_extract(fp_a, 'SequenceNumber=(\d+)', 1) as seq_a, regexp_extract(fp_b, 'SequenceNumber=(\d+)', 1) as seq_b
    from mismatches where what <> 'nccl_around'   -- a rank named alone, with no value to vote on
)
select distinct what, rank, value from (
    select what, rank_a as rank, coalesce(cast(n_a as varchar), regexp_replace(fp_a, 'SequenceNumber=\d+,? ?', '')) as value
    from reports
    union all
    select what, rank_b, coalesce(cast(n_b as varchar), regexp_replace(fp_b, 'SequenceNumber=\d+,? ?', ''))
    from reports where seq_a is not distinct from seq_b
    union all  -- the monitored barrier's own fingerprint (mismatch_rows.sql): that rank sat in another
               -- call, a barrier in the known runs
    select 'detail_fingerprint', rank_b, 'another call (its fingerprint: the monitored barrier''s own)'
    from barrier_fingerprints
    where rank_b not in (select rank_a from reports where rank_a is not null)   -- its own report says more
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
  and n.n * 2 > n.ranks
union all
-- Without a majority, a DDP model with no parameters at all is still the odd one: that rank
-- built nothing to train (a branch that skipped the model, every parameter frozen), where the
-- other side's count is what the program builds.
select v.what, v.rank, v.value, o.value
from mismatch_votes v join norm n using (what)
join (select distinct what, value from mismatch_votes where value <> '0') o using (what)
where v.what = 'ddp_params' and v.value = '0' and n.values_seen = 2 and n.n * 2 <= n.ranks;

-- The same fingerprint at another SequenceNumber (`Sequence number: 19vs 31`, op, shape and dtype
-- alike): each rank's own number as the reports give it (its latest); a rank whose number is not
-- the one most ranks hold issued more collectives than they did, or fewer.
create or replace temp table seq_votes as
with alike as (  -- reports whose two fingerprints differ in the number alone
    select * from mismatches where what = 'detail_fingerprint'
      and regexp_replace(fp_a, 'SequenceNumber=\d+,?\s*', '') = regexp_replace(fp_b, 'SequenceNumber=\d+,?\s*', '')
)
select rank, max(seq) as seq from (
    select rank_a as rank, try_cast(regexp_extract(fp_a, 'SequenceNumber=(\d+)', 1) as bigint) as seq from alike
    union all
    select rank_b, try_cast(regexp_extract(fp_b, 'SequenceNumber=(\d+)', 1) as bigint) from alike
) where rank is not null and seq is not null
group by rank;

create or replace temp table seq_minority as
with counts as (select seq, count(*) as n from seq_votes group by seq),
norm as (select arg_max(seq, n) as seq, max(n) as n, sum(n) as ranks from counts)
select v.rank, v.seq, n.seq as norm from seq_votes v, norm n
where v.seq <> n.seq and n.n * 2 > n.ranks
  -- where no rank's fingerprint differs in more (the mismatch rules read those)
  and not exists (select 1 from mismatch_minority);
