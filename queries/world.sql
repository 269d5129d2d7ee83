-- The ranks of the job: every global rank any source names, and the world size they state.
create or replace temp table world as
select distinct rank from (
    select rank from events union all select rank from processes union all select rank from exits
    union all select rank from progress union all select rank from collectives
) where rank is not null and rank >= 0 and rank < 1000000;

create or replace temp table world_size as
select coalesce(
    (select max(world_size) from processes),
    (select max(nranks) from comms),
    (select max(rank) + 1 from world)) as n;
