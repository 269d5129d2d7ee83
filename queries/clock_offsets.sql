-- Per-host clock offsets estimated from the logs themselves: a synchronous step ends at the same
-- moment on every rank, and watchdogs of one (pg, seq) fire together. Offset = median difference
-- to the reference host over matched moments; uncertainty = median absolute deviation plus the
-- timestamps' own resolution (c10 lines are whole seconds).
create or replace temp table clock_moments as
select host, 'step ' || step as moment, median(epoch_ms(ts)) as ms from progress
where host is not null and ts is not null group by host, step
union all
select host, 'timeout ' || pg || '#' || seq, median(epoch_ms(ts)) from collectives
where state = 'timeout' and host is not null and ts is not null group by host, pg, seq;

create or replace temp table clock_reference as
select host from clock_moments group by host order by count(*) desc, host limit 1;

create or replace temp table clock_offsets as
select h.host, median(h.ms - r.ms) as offset_ms,
       coalesce(mad(h.ms - r.ms), 0) + 1000 as uncertainty_ms, count(*) as moments
from clock_moments h join clock_moments r on r.moment = h.moment and r.host = (select host from clock_reference)
where h.host <> r.host
group by h.host;

-- Aligned time of every event: its host's clock minus that host's offset.
create or replace temp view aligned_events as
select e.*, e.ts - to_milliseconds(cast(coalesce(o.offset_ms, 0) as bigint)) as aligned_ts
from events e left join clock_offsets o using (host);

-- The same line seen twice (torchrun tees each rank's lines into the console and its own file):
-- keep one, preferring the file that speaks for a single rank.
create or replace temp view timeline_events as
select * from aligned_events
qualify row_number() over (partition by rank, kind, text, aligned_ts
                           order by (file in (select file from rank_by_file)) desc, file, line) = 1;
