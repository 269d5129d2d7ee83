-- Where each rank's first traceback stood, frame by frame, and the collective call it sat in.
-- Plain gloo logs have no sequence numbers, but the tracebacks of ranks that waited for each other
-- still say which call each one waited in and how it got there.
-- A traceback is a `traceback_start` line and the frames after it in its rank's stream of a file
-- (frames before any: a paste of one);
-- a rank's first is the earliest (the same one tee'd into another file is the same traceback),
-- before it was told to stop (after a SIGTERM, a handler's own collective says nothing of where
-- the rank stood).
create or replace temp table tb_frames as
with t as (
    select rank, file, line, ts, kind, text,
           sum(case when kind = 'traceback_start' then 1 else 0 end)
               over (partition by rank, file order by line rows unbounded preceding) as block
    from events where rank is not null and kind in ('traceback_start', 'traceback_frame')
), frames as (
    select rank, file, block, line, ts,
           regexp_extract(text, 'File "([^"]+)", line (\d+), in (\S+)', ['path', 'lineno', 'fn']) as f
    from t where kind = 'traceback_frame' and regexp_matches(text, 'File "[^"]+", line \d+, in \S+')
      and not exists (select 1 from rank_facts r where r.rank = t.rank
                      and said_after_stop(t.ts, t.file, t.line, r.term_at, r.term_file, r.term_line))
), first_block as (
    select rank, arg_min(file, (coalesce(ts, timestamp '2999-01-01'), file, line)) as file,
           arg_min(block, (coalesce(ts, timestamp '2999-01-01'), file, line)) as block
    from frames group by rank
)
select f.rank, f.file, f.line, f.f.path as path, cast(f.f.lineno as bigint) as lineno, f.f.fn as fn,
       row_number() over (partition by f.rank order by f.line) as depth
from frames f join first_block b using (rank, file, block);

-- A rank with no traceback but a stack dump taken during the hang (py-spy, faulthandler; see
-- stacks.sql: last_dump) stood where its dumped thread's frames say; a dump lists the innermost
-- frame first, so depth counts from its last.
insert into tb_frames
with thread as (
    select d.rank, d.file, d.start,
           coalesce(min(e.line) filter (where e.kind = 'stack_dump_start' and e.line > d.start), 9223372036854775807) as stop
    from last_dump d left join events e on e.file = d.file and e.rank = d.rank
    where d.rank not in (select rank from tb_frames)
    group by all
), frames as (   -- py-spy's `    fn (path:line)`, faulthandler's `  File "path", line N in fn`
    select e.rank, e.file, e.line,
           case when regexp_matches(e.text, '^\s+\S+ \([^:()]+:\d+\)$')
                then regexp_extract(e.text, '^\s+(\S+) \(([^:()]+):(\d+)\)$', ['fn', 'path', 'lineno'])
                else regexp_extract(e.text, 'File "([^"]+)", line (\d+) in (\S+)', ['path', 'lineno', 'fn']) end as f
    from thread t join events e on e.file = t.file and e.rank = t.rank and e.kind = 'stack_frame'
                               and e.line > t.start and e.line < t.stop
)
select rank, file, line, f.path, cast(f.lineno as bigint), f.fn, row_number() over (partition by rank order by line desc)
from frames where f.lineno <> '';

-- The call: the outermost frame in torch.distributed's distributed_c10d.py (the API the program
-- called: all_reduce, broadcast, barrier...); without one, the innermost frame of torch itself
-- (DDP's reducer all-reduces the gradients from C++ under autograd's `_engine_run_backward`, its
-- buffers under `_distributed_broadcast_coalesced`). Ranks that wait for each other sit in the
-- same call; a rank that skipped, added or reordered a collective sits in another one.
create or replace temp table blocked_calls as
with c10d as (
    select rank, arg_min(fn, depth) as call, arg_min(file, depth) as file, arg_min(line, depth) as line
    from tb_frames where path like '%distributed_c10d.py' group by rank
), torch_own as (
    select rank, arg_max(fn, depth) as call, arg_max(file, depth) as file, arg_max(line, depth) as line
    from tb_frames where regexp_matches(path, '/torch/') and rank not in (select rank from c10d) group by rank
)
select * from c10d union all select * from torch_own;

-- Whether the calls say where ranks waited for each other: every rank of the job failed inside a
-- call, and none crashed, was killed or left first (then the others were wherever its death found
-- them, which says nothing of a mismatch).
create or replace temp table all_waiting as
select (select count(distinct rank) from blocked_calls) = (select count(*) from world)
   and (select count(*) from world) >= 2
   and not exists (select 1 from rank_facts where own_errors > 0 or killed_hard or crashed_signal
                                               or left_cleanly or absent_from_summary) as yes;

-- The ranks in the call fewer ranks sit in, when exactly two calls split the ranks and the
-- larger side has at least two: a majority waiting together and the odd ones out.
create or replace temp table call_minority as
with calls as (select call, list(rank order by rank) as ranks, count(*) as n from blocked_calls group by call)
select unnest(c.ranks) as rank, c.call, (select call from calls order by n desc limit 1) as majority_call
from calls c
where (select count(*) from calls) = 2 and c.n < (select max(n) from calls) and (select max(n) from calls) >= 2
  and (select yes from all_waiting);

-- A frame as the findings cite it (`train.py:159 in train_one_epoch`), and where a path of such
-- frames (outermost first) parts from another: the first position where they differ, null where
-- one path is the start of the other. site_minority and path_minority compare paths so.
create or replace temp macro frame_site(path, lineno, fn) as
    regexp_replace(path, '^.*[/\\]', '') || ':' || lineno || ' in ' || fn;
create or replace temp macro parted_at(frames, other) as
    list_position(list_transform(range(1, least(len(frames), len(other)) + 1), lambda i: frames[i] = other[i]), false);

-- The ranks that failed in the same collective call as the others but reached it from another
-- line of the program (the path of the script's own frames down to the call): an `if` that hands
-- the collective another tensor, or the same op further on after a skipped one. Two paths split
-- the ranks with tracebacks, the larger side has at least two, and no rank failed or left on its
-- own: a rank with no traceback only lost its peers (gloo's size check aborts the receiver).
create or replace temp table site_minority as
with paths as (
    select rank, list(frame_site(path, lineno, fn) order by depth) as frames,
           list(line order by depth) as lines, any_value(file) as file
    from tb_frames where not regexp_matches(path, '[/\\](torch|site-packages|dist-packages)[/\\]')
    group by rank
), sites as (
    select b.call, p.frames, list(b.rank order by b.rank) as ranks, count(*) as n
    from blocked_calls b join paths p using (rank) group by b.call, p.frames
), parted as (   -- the minority's first frame that is not the majority's: where the paths parted
    select s.*, m.frames as majority_frames, parted_at(s.frames, m.frames) as at
    from sites s, (select frames from sites order by n desc limit 1) m
    where (select count(*) from sites) = 2 and (select count(distinct call) from sites) = 1
      and s.n < (select max(n) from sites) and (select max(n) from sites) >= 2
      and not exists (select 1 from rank_facts where own_errors > 0 or killed_hard or crashed_signal
                                                  or left_cleanly or absent_from_summary)
)
select p.rank, p.file, p.lines[coalesce(t.at, len(p.lines))] as line, t.call,
       t.frames[coalesce(t.at, len(t.frames))] as site, t.majority_frames[coalesce(t.at, len(t.majority_frames))] as majority_site
from parted t, unnest(t.ranks) as u(rank) join paths p on p.rank = u.rank;

-- Which of two ranks stood further along the program when they failed: the one that logged more
-- steps, else, in the same step, the one whose traceback went on from a later line of the first
-- function their stacks share at different lines (the point where their paths parted, in
-- straight-line code: `dist.all_reduce(m)` at line 172 comes before `dist.broadcast(s)` at 173).
-- cmp < 0: `ra` is behind `rb`; 0: the same place, or nothing tells.
create or replace temp table call_order as
with pos as (
    select b.rank, coalesce(f.last_step, -1) as step from blocked_calls b join rank_facts f using (rank)
), occ as (
    select *, row_number() over (partition by rank, path, fn order by depth) as k from tb_frames
), common as (
    select a.rank as ra, b.rank as rb, a.depth, a.lineno as la, b.lineno as lb
    from occ a join occ b on a.path = b.path and a.fn = b.fn and a.k = b.k and a.rank <> b.rank
), first_diff as (
    select ra, rb, arg_min(sign(la - lb), depth) as cmp from common where la <> lb group by ra, rb
)
select pa.rank as ra, pb.rank as rb,
       case when pa.step <> pb.step then sign(pa.step - pb.step) else coalesce(d.cmp, 0) end as cmp
from pos pa join pos pb on pa.rank <> pb.rank
left join first_diff d on d.ra = pa.rank and d.rb = pb.rank;

-- The one rank left behind: every rank failed inside a collective (a traceback each), and every
-- other rank had gone past the collective this one still waited in. They completed it, so what it
-- issued there was not what they issued (a size, a dtype: gloo does not check), or it never
-- completed for it alone.
create or replace temp table left_behind as
select o.ra as rank, any_value(b.call) as call,
       (select arg_max(regexp_replace(t.path, '^.*/', '') || ':' || t.lineno || ' in ' || t.fn, t.depth)
          from tb_frames t where t.rank = o.ra and not regexp_matches(t.path, '/torch/')) as site
from call_order o join blocked_calls b on b.rank = o.ra
group by o.ra
having bool_and(o.cmp < 0) and count(*) >= 2 and (select yes from all_waiting);

-- Stack dumps of every rank, taken during a hang, that show no collective's frame (py-spy shows no
-- C++ one: DDP's forward waits in its buffers' broadcast under a Python `forward`): every rank
-- stood in the same innermost frame, and the program's paths to it split the ranks in two, the
-- larger side at least two. The few reached it from another path (a rank-0-only evaluation
-- through the same model): what they issued there is not what the others issued.
create or replace temp table path_minority as
with paths as (
    select rank, list(frame_site(path, lineno, fn) order by depth) as frames,
           list(line order by depth) as lines, any_value(file) as file
    from tb_frames where rank in (select rank from last_dump)
    group by rank
), sites as (
    select frames, list(rank order by rank) as ranks, count(*) as n from paths group by frames
), parted as (   -- the minority's first frame that is not the majority's: where the paths parted
    select s.*, parted_at(s.frames, m.frames) as at
    from sites s, (select frames from sites order by n desc limit 1) m
    where (select count(*) from sites) = 2 and s.n < (select max(n) from sites) and (select max(n) from sites) >= 2
)
select p.rank, p.file, p.lines[coalesce(t.at, len(p.lines))] as line, t.frames[coalesce(t.at, len(t.frames))] as site
from parted t, unnest(t.ranks) as u(rank) join paths p on p.rank = u.rank
where (select count(distinct frames[len(frames)]) from paths) = 1
  and (select count(*) from paths) = (select count(*) from world)
  and not exists (select 1 from blocked_calls)
  and not exists (select 1 from rank_facts where own_errors > 0 or killed_hard or crashed_signal);
