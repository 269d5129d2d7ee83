-- Identity join: give every row a GLOBAL rank where the logs allow it.
-- Sources of the link, strongest first: the row's own prefix ([rankG]:, srun label), the process
-- (host, pid) that a start-up line or the world communicator names, a torchrun local rank that a
-- line of the same console tags with its global rank too, the torchrun local rank on
-- its host (or alone, on a single host), and the single rank a per-rank file speaks for.
-- Unknown stays null.

-- A py-spy dump opens with its process (`Process P: cmd`); its threads' headings and frames until
-- the next dump are that process's: they take its pid, which the links below turn into a rank,
-- and the rank its command line gives it (`--rank 3`, fairseq's `distributed_rank=3`; not a
-- `--local_rank` or `--node_rank`), where the line has no rank of its own.
update events e set pid = coalesce(e.pid, d.pid), rank = coalesce(e.rank, d.rank)
from (
    select file, line as start, lead(line) over (partition by file order by line) as stop,
           cast(regexp_extract(text, '^Process (\d+):', 1) as bigint) as pid,
           try_cast(regexp_extract(text, '(?:^|[\s.+-])(?:distributed_)?rank[= ](\d+)(?:\s|$)', 1) as bigint) as rank
    from events where kind = 'stack_dump_process' and regexp_matches(text, '^Process \d+:')
) d
where e.file = d.file and e.line >= d.start and (d.stop is null or e.line < d.stop)
  and (e.pid is null or (e.rank is null and d.rank is not null))
  and e.kind in ('stack_dump_process', 'stack_dump_start', 'stack_frame');

-- The DeepSpeed launcher's workers (deepspeed_spawned: pid, local rank) are the global ranks their
-- node's layout line gives them (deepspeed_node_layout: node_rank * num_local_procs + local rank),
-- where their file and host state one layout.
update processes p set rank = l.node_rank * l.procs + p.local_rank
from (
    select file, host, any_value(cast(regexp_extract(text, 'node_rank=(\d+)', 1) as bigint)) as node_rank,
           any_value(cast(regexp_extract(text, 'num_local_procs=(\d+)', 1) as bigint)) as procs
    from events where kind = 'deepspeed_node_layout'
    group by file, host having count(distinct regexp_extract(text, 'nnodes=.*')) = 1
) l
where p.source = 'deepspeed' and p.rank is null and p.local_rank is not null
  and p.file = l.file and p.host is not distinct from l.host;

-- torchrun's `--role rank` (torchtitan's launcher) tees each worker's lines as `[rank<local>]:`, the
-- marker c10 writes with the global rank. In a file whose agent names its role `rank` (`[rank]
-- Rendezvous complete for workers`), the marker is the local rank, and the agent's rendezvous
-- result (`local_ranks=[0, 1, 2, 3]`, `global_ranks=[8, 9, 10, 11]`) maps it to the global one
-- (apply_identity.sql); a file whose restarts changed the mapping is left as it reads.
create or replace temp table local_role_ranks as
with lists as (
    select file, line, regexp_extract(text, '(local|global)_ranks=', 1) as key,
           list_transform(string_split(regexp_extract(text, '_ranks=\[([^\]]*)\]', 1), ','), lambda x: try_cast(trim(x) as bigint)) as ranks
    from events
    where regexp_matches(text, '^\s*(?:local|global)_ranks=\[[\d, ]+\]\s*$')
      and file in (select file from events where source = 'torchelastic' and starts_with(text, '[rank] '))
), pairs as (   -- a result's local_ranks, then its global_ranks a few lines on
    select file, ranks as locals, lead(ranks) over (partition by file order by line) as globals, key,
           lead(key) over (partition by file order by line) as next_key
    from lists
)
select file, unnest(locals) as local_rank, unnest(globals) as rank
from (select file, any_value(locals) as locals, any_value(globals) as globals from pairs
      where key = 'local' and next_key = 'global' and len(locals) = len(globals)
      group by file having count(distinct (locals, globals)) = 1);

insert into rank_readings
select '[rankN]: where torchrun''s agent has the role `rank`', 'the local rank torchrun tees (its rendezvous result maps it to the global rank)', count(*)
from events e where exists (select 1 from local_role_ranks l where l.file = e.file and l.local_rank = e.rank and l.local_rank <> l.rank)
having count(*) > 0;

-- nvidia-smi's process table beside stack dumps, on one host, and no global rank in any line: a
-- process's GPU is its local rank, and on one node its global rank (a reading).
insert into rank_readings
select 'a process''s GPU in nvidia-smi''s process table, one host, no global rank in the logs', 'the global rank (one node, one GPU per process)', count(*)
from processes where source = 'nvidia_smi' and rank is null
  and not exists (select 1 from events where rank is not null)
  and not exists (select 1 from processes where rank is not null)
  and (select count(distinct host) from events where host is not null) <= 1
having count(*) > 0;

update processes set rank = local_rank
where source = 'nvidia_smi' and rank is null
  and not exists (select 1 from events where rank is not null)
  and not exists (select 1 from processes where rank is not null)
  and (select count(distinct host) from events where host is not null) <= 1;

create or replace temp table rank_by_pid as
select host, pid, min(rank) as rank from (
    select host, pid, rank from processes where rank is not null and pid is not null
    union all
    -- the world communicator (the largest): NCCL before 2.18 prints no commId
    select host, pid, rank from comms
    where nranks = (select max(nranks) from comms) and rank is not null
) group by host, pid having count(distinct rank) = 1;

-- A pid alone, where it names one rank in the whole job: torchrun's failure table and its agent
-- lines (`local_rank: L (pid: P)`, `Sending process P closing signal`) give pids, not hosts.
create or replace temp table rank_by_pid_alone as
select pid, min(rank) as rank from (
    select pid, rank from processes where rank is not null and pid is not null
    union all
    select pid, rank from exits where source = 'torchelastic_summary' and rank is not null and pid is not null
) group by pid having count(distinct rank) = 1;

-- A torchrun local rank in one agent's console: a line tagged with both (`[default3]:[rank11]:
-- Traceback ...`, torchrun's tee around the rank's own prefix) says which global rank that local
-- rank is in this file, for its other lines (progress bars, prints) that carry the tee tag only.
create or replace temp table rank_by_file_local as
select file, local_rank, min(rank) as rank from events
where rank is not null and local_rank is not null
  -- the rank of the line's own prefix, not one read from its text (`[Rank 1]` may be PG-local)
  and (file, line) not in (select file, line from inline_rank_lines)
group by file, local_rank having count(distinct rank) = 1;

-- A torchrun local rank on its host: a per-rank file of a multi-node job (attempt_0/<local>/)
-- whose rank its own lines do not say is the rank its host's start-up line gives that local rank.
create or replace temp table rank_by_host_local as
select host, local_rank, min(rank) as rank from processes
where rank is not null and local_rank is not null and host is not null
group by host, local_rank having count(distinct rank) = 1;

-- On a single host a local rank is one global rank: as the start-up lines or torchrun's failure
-- table (`rank : 1 (local_rank: 1)`) pair them; several agents' tables that pair one local rank
-- with several ranks (many hosts) give no link. torch.multiprocessing.spawn's process index is
-- the rank the program gives it on one host (`mp.spawn(main, nprocs=N)`, `main(rank, ...)`).
-- Where every pair the logs show is a local rank equal to its global one (torchrun on one host
-- numbers both alike), a local rank no line pairs is that global rank too (the HF examples'
-- `Process rank: 0, device: cuda:0` of a rank that never failed, so no table lists it).
create or replace temp table local_pairs as
select local_rank, rank, host from processes
union all
select local_rank, rank, host from exits where source = 'torchelastic_summary'
union all
select local_rank, local_rank, host from exits where source = 'mp_spawn';

create or replace temp table single_agent_locals as
select local_rank, host from exits
where source = 'torchelastic' and local_rank between 0 and 1023
  and (select count(distinct file) from exits where source in ('torchelastic', 'torchelastic_summary')) = 1
  and not exists (select 1 from events where rank is not null)
  and not exists (select 1 from processes where rank is not null);

insert into rank_readings
select 'torchrun''s local_rank, one agent, no global rank in the logs', 'the global rank (one node assumed)', count(*)
from single_agent_locals having count(*) > 0;

-- CUDA's out-of-memory error names the device (`(GPU 3; 79.15 GiB total capacity; ...)`), and the
-- launchers give each process the device of its local rank (torchrun and DeepSpeed's cuda:LOCAL_RANK,
-- fairseq's and spawn's device_id = process index): an OOM line no prefix gives a rank or local
-- rank is that local rank's (a reading: job.rank_readings).
update events set local_rank = cast(regexp_extract(text, '\(GPU (\d+); ', 1) as bigint)
where kind = 'out_of_memory' and rank is null and local_rank is null and regexp_matches(text, '\(GPU \d+; ');

insert into rank_readings
select '(GPU n; ...) of a CUDA out-of-memory error without a rank', 'the local rank (the launchers give each process the device of its local rank)', count(*)
from events where kind = 'out_of_memory' and rank is null and local_rank is not null and regexp_matches(text, '\(GPU \d+; ')
having count(*) > 0;

create or replace temp table rank_by_local as
select local_rank, min(rank) as rank from (
    select * from local_pairs
    union all
    select local_rank, local_rank, host from processes
    where rank is null and local_rank between 0 and 1023
      and exists (select 1 from local_pairs where rank is not null and local_rank is not null)
      and not exists (select 1 from local_pairs where rank <> local_rank)
    union all   -- an OOM's device (above), where the pairs the logs show number both alike
    select local_rank, local_rank, host from events
    where kind = 'out_of_memory' and rank is null and local_rank between 0 and 1023
      and exists (select 1 from local_pairs where rank is not null and local_rank is not null)
      and not exists (select 1 from local_pairs where rank <> local_rank)
    union all
    -- one agent's console and no global rank in any line: torchrun on one node numbers its
    -- workers' local and global ranks alike (a reading: job.rank_readings)
    select local_rank, local_rank, host from single_agent_locals
)
where rank is not null and local_rank is not null
  and (select count(distinct host) from processes where host is not null) <= 1
  -- nor where the job's lines come from several hosts (a directory per node, NCCL's hostnames,
  -- the failure tables of several agents)
  and (select count(distinct host) from events where host is not null) <= 1
  and (select count(distinct host) from exits where source = 'torchelastic_summary' and host is not null) <= 1
group by local_rank having count(distinct rank) = 1;

-- Not a launcher's console: a file that holds torchrun's agent lines or names several ranks'
-- exits mixes the output of many processes, even where only one of them says its rank.
create or replace temp table rank_by_file as
select file, min(rank) as rank from (
    select file, rank from events where rank is not null
    union all select file, rank from processes where rank is not null
) f
where file not in (select file from events where source = 'torchelastic')
  and file not in (select file from exits where rank is not null group by file having count(distinct rank) > 1)
  -- nor is a console whose lines come from several processes (Ray's `(Actor pid=N)`, NCCL's
  -- host:pid:tid): one rank's tag there speaks for its own process only
  and file not in (select file from events where pid is not null group by file having count(distinct pid) > 1)
group by file having count(distinct rank) = 1;

-- A job of one process (`dist_world_size=1`, `world_size=1`, a communicator of 1 rank, and no
-- other rank named): the worker the launcher reports dead, or whose error no prefix tags, is rank 0.
create or replace temp table one_rank_world as
select 0 as rank
where exists (select 1 from processes where world_size = 1)
  and not exists (select 1 from processes where world_size > 1)
  and not exists (select 1 from comms where nranks > 1)
  and not exists (select 1 from events where rank > 0)
  and not exists (select 1 from processes where rank > 0);

insert into rank_readings
select 'a worker line without a rank in a job of one process', 'rank 0', count(*)
from events where rank is null and exists (select 1 from one_rank_world)
having count(*) > 0;

-- A pod the user deleted (kubectl delete pod) whose own lines are not here: a PyTorchJob's
-- `<job>-worker-N` runs node N, or N+1 beside a `<job>-master-0` (a reading: one process per pod).
insert into rank_readings
select 'a deleted pod (kubectl delete pod) named <job>-worker-N, without lines of its own', 'rank N, or N+1 beside a <job>-master-0 (one process per pod)', count(*)
from exits where reason = 'pod_deleted' and rank is null and regexp_matches(host, '-worker-\d+$')
  and host not in (select host from events where rank is not null and host is not null)
having count(*) > 0;

update exits set rank = cast(regexp_extract(host, '-worker-(\d+)$', 1) as bigint)
    + case when exists (select 1 from events where regexp_matches(host, '-master-\d+$')) then 1 else 0 end
where reason = 'pod_deleted' and rank is null and regexp_matches(host, '-worker-\d+$')
  and host not in (select host from events where rank is not null and host is not null);
