-- The first collective where ranks disagree: per (pg, counter, seq), ranks grouped by what they
-- issued (op, numel, dtype); a seq that some ranks issued and others never did also diverges.
create or replace temp table issued as
select pg, counter, seq, rank, any_value(op) as op, any_value(numel_in) as numel, any_value(dtype) as dtype
from seq_rows where state in ('issued', 'timeout', 'scheduled', 'started', 'completed')
group by pg, counter, seq, rank;

create or replace temp table seq_groups as
select pg, counter, seq, op, numel, dtype, list(rank order by rank) as ranks, count(*) as n
from issued group by pg, counter, seq, op, numel, dtype;

create or replace temp table divergence as
with members as (
    select pg, counter, count(distinct rank) as ranks from issued group by pg, counter
), split as (  -- seqs where ranks issued different things
    select pg, counter, seq from seq_groups group by pg, counter, seq having count(*) > 1
), missing as (  -- seqs some ranks never issued although they issued later ones or others went on
    select i.pg, i.counter, i.seq from issued i join members m using (pg, counter)
    group by i.pg, i.counter, i.seq, m.ranks
    having count(distinct i.rank) < m.ranks and m.ranks >= 2
)
select pg, counter, min(seq) as seq, bool_or(kind = 'split') as split from (
    select *, 'split' as kind from split union all select *, 'missing' from missing
) group by pg, counter
order by case counter when 'pg_seq' then 0 when 'fr_seq' then 1 when 'detail_seq' then 2 else 3 end, seq
limit 1;
