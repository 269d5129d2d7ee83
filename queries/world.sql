-- The ranks of the job: every global rank any source names, plus 0..N-1 when a process or the
-- world communicator states the world size N (a rank whose own log is missing is still a rank).
-- Without a stated size, the ranks seen give it only when they are 0..max without a gap: a paste
-- of one rank's lines (`[rank5]:`) says nothing of how many ranks the job had, and a stray big
-- number must never become a million ranks.
create or replace temp table ranks_named as
select distinct rank from (
    select rank from events union all select rank from processes union all select rank from exits
    union all select rank from progress union all select rank from collectives
) where rank between 0 and 131071;

-- One torchrun agent's console: the workers it names (the ones that failed, the ones it sent
-- closing signals, by pid) are its local ranks, so the job has at least that many ranks.
create or replace temp table agent_workers as
select count(distinct pid) as n from exits
where source in ('torchelastic', 'torchelastic_summary') and pid is not null and reason <> 'agent_signaled'
having count(distinct file) = 1 and count(distinct host) <= 1 and count(distinct pid) between 2 and 1024;

create or replace temp table world_size as
select coalesce(
    (select max(n) from (select world_size as n from processes union all select nranks from comms)
     where n between 1 and 131072),
    (select greatest(max(rank) + 1, (select max(n) from agent_workers)) from ranks_named
     having count(*) = max(rank) + 1 or max(rank) < (select max(n) from agent_workers)),
    (select max(n) from agent_workers)
) as n;

create or replace temp table world as
select rank from ranks_named
union
select unnest(range(0, coalesce((select n from world_size), 0))) as rank;
