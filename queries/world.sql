-- The ranks of the job: every global rank any source names, plus 0..N-1 when a process or the
-- world communicator states the world size N (a rank whose own log is missing is still a rank).
create or replace temp table world_size as
select coalesce(
    (select max(world_size) from processes),
    (select max(nranks) from comms),
    (select max(rank) + 1 from (
        select rank from events union all select rank from processes union all select rank from exits
        union all select rank from progress union all select rank from collectives) where rank between 0 and 999999)
) as n;

create or replace temp table world as
select distinct rank from (
    select rank from events union all select rank from processes union all select rank from exits
    union all select rank from progress union all select rank from collectives
    union all select unnest(range(0, least((select n from world_size), 1000000))) as rank
) where rank is not null and rank >= 0 and rank < 1000000;
