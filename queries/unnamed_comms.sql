-- NCCL before 2.19 prints no commId when it creates a communicator: each process knows it only by
-- its own pointer (`comm 0x55d0c41f2a80 rank 0 nranks 2`), so one communicator's opCounts would
-- read as a communicator per process and never be compared. Every member creates its
-- communicators in the program's order, so the k-th communicator of N ranks that each process
-- created is one communicator, where that is consistent: exactly N processes, each with its own
-- rank in it (TP groups of one size on several processes give repeated ranks, and are left apart).
create or replace temp table unnamed_comms as
with created as (
    select host, pid, comm, any_value(rank) as rank, any_value(nranks) as nranks,
           min(ts) as ts, min(file) as file, min(line) as line
    from comms
    where phase = 'COMPLETE' and comm_id is null and host is not null and pid is not null and nranks is not null
    group by host, pid, comm
), ordered as (
    select *, row_number() over (partition by host, pid, nranks order by ts nulls last, file, line, comm) as nth
    from created
)
select o.host, o.pid, o.comm, format('{}-rank comm #{}', o.nranks, o.nth) as comm_id
from ordered o
where (o.nranks, o.nth) in (select nranks, nth from ordered group by nranks, nth
                            having count(*) = any_value(nranks) and count(distinct rank) = count(*));

update comms c set comm_id = u.comm_id from unnamed_comms u
where c.comm_id is null and c.host = u.host and c.pid = u.pid and c.comm = u.comm;
