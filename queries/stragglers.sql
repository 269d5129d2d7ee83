-- Ranks slower than the others in most steps, from any timing the logs give per rank:
--   step_end   the rank ends its steps later than the median rank (aligned time), by far more than
--              the noise (a synchronous job ends steps together: this shows only where ranks run apart);
--   data_wait  it waits far longer for its data (a straggler in a synchronous job: the others then
--              wait for it inside the collectives, so their steps end together);
--   step_time  the step time it measures itself is far longer (a trainer's step_time / iter_ms,
--              Megatron's elapsed time per iteration, a progress bar's s/it);
--   rate       its throughput is far lower (torchtitan's tps, DeepSpeed's samples/s, a bar's it/s).
-- A progress bar's rows carry the time of the line before them: they count for their rate only.
create or replace temp table step_lag as
with t as (
    select p.rank, p.step,
           min(p.ts - to_milliseconds(cast(coalesce(o.offset_ms, 0) as bigint))) as ts
    from progress p left join clock_offsets o using (host)
    where p.rank is not null and p.ts is not null and coalesce(p.source, '') <> 'bar' group by p.rank, p.step
), m as (
    select step, median(epoch_ms(ts)) as med from t group by step having count(*) >= 3
)
select t.rank, t.step, epoch_ms(t.ts) - m.med as lag_ms from t join m using (step);

create or replace temp table straggler_ranks as
select rank, median(lag_ms) as lag_ms, count(*) as steps, 'step_end' as basis, null::double as ratio from step_lag
group by rank
having count(*) >= 3 and median(lag_ms) >= 250
   and median(lag_ms) > 3 * (select median(abs(lag_ms)) from step_lag) + 50;

-- Where scripts log the time each step waited for data, a rank that waits far longer than the
-- others is the slow one even when synchronous steps end together on every rank.
insert into straggler_ranks
with d as (select rank, median(data_s) as data_s, count(*) as steps from progress
           where data_s is not null and rank is not null group by rank)
select rank, round(data_s * 1000) as lag_ms, steps, 'data_wait', null from d
where steps >= 3 and data_s >= 0.1
  and data_s > 3 * (select median(data_s) from d) + 0.05
  and rank not in (select rank from straggler_ranks);

-- A rank whose own step time is far above the others' (at least 1.5 times the median rank's and
-- 50 ms more), at least 3 ranks timing their steps.
insert into straggler_ranks
with s as (select rank, median(step_s) as step_s, count(*) as steps from progress
           where step_s is not null and rank is not null group by rank)
select rank, round((step_s - (select median(step_s) from s)) * 1000), steps, 'step_time',
       step_s / nullif((select median(step_s) from s), 0) from s
where steps >= 3 and (select count(*) from s) >= 3
  and step_s >= 1.5 * (select median(step_s) from s) and step_s - (select median(step_s) from s) >= 0.05
  and rank not in (select rank from straggler_ranks);

-- A rank whose throughput is at most two thirds of the median rank's.
insert into straggler_ranks
with r as (select rank, median(rate) as rate, count(*) as steps from progress
           where rate is not null and rate > 0 and rank is not null group by rank)
select rank, null, steps, 'rate', rate / (select median(rate) from r) from r
where steps >= 3 and (select count(*) from r) >= 3
  and rate <= 2.0 / 3 * (select median(rate) from r)
  and rank not in (select rank from straggler_ranks);
