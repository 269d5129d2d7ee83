-- Ranks that end their steps consistently later than the others (aligned time): per step, each
-- rank's lag behind the median rank; a straggler lags in most steps, by far more than the noise.
create or replace temp table step_lag as
with t as (
    select p.rank, p.step,
           min(p.ts - to_milliseconds(cast(coalesce(o.offset_ms, 0) as bigint))) as ts
    from progress p left join clock_offsets o using (host)
    where p.rank is not null and p.ts is not null group by p.rank, p.step
), m as (
    select step, median(epoch_ms(ts)) as med from t group by step having count(*) >= 3
)
select t.rank, t.step, epoch_ms(t.ts) - m.med as lag_ms from t join m using (step);

create or replace temp table straggler_ranks as
select rank, median(lag_ms) as lag_ms, count(*) as steps from step_lag
group by rank
having count(*) >= 3 and median(lag_ms) >= 250
   and median(lag_ms) > 3 * (select median(abs(lag_ms)) from step_lag) + 50;

-- Where scripts log the time each step waited for data, a rank that waits far longer than the
-- others is the slow one even when synchronous steps end together on every rank.
insert into straggler_ranks
with d as (select rank, median(data_s) as data_s, count(*) as steps from progress
           where data_s is not null and rank is not null group by rank)
select rank, round(data_s * 1000) as lag_ms, steps from d
where steps >= 3 and data_s >= 0.1
  and data_s > 3 * (select median(data_s) from d) + 0.05
  and rank not in (select rank from straggler_ranks);
