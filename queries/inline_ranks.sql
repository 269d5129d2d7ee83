-- A rank that the message itself names, for lines whose prefix named none: c10's
-- `[PG ID 0 PG GUID 0(default_pg) Rank 3]` (the default PG, where the PG rank is the global one),
-- its older `[Rank 3]` (no PG named: taken as the default PG, and said so in the report), and the
-- bracketed markers trainers put first (`[rank: 3]` Lightning, `[Rank 3]` DeepSpeed, `[rank 3]`,
-- `[rank 3/8]` with the world size),
-- also where a C++ exception's `what():` quotes the message, after a logger's dotted name that
-- the logging header left in it (`tsfm.train: [rank0] running validation`), or after a script's
-- own date and time (`2026-05-02 09:32:27 [rank0/2] epoch 1 ...`).
-- A sub-PG's `[PG ID 2 ... Rank 1]` is a rank inside that group, not a global rank: left alone.
-- Keyed by the text too: a line cut into pieces (tqdm's `\r` redraws of several ranks) has an
-- event per piece, each with its own marker.
create or replace temp table inline_rank_lines as
select file, line, text,
       cast(regexp_extract(text, '^(?:\s*what\(\):\s+|[A-Za-z_]\w*(?:\.\w+)+:\s+|\d{4}-\d\d-\d\d[ T][\d:.,]+\s+)?\[(?:PG (?:ID )?0 (?:PG GUID [^ \]]* |\([^)]*\) )?)?[Rr]ank:? ?(\d+)(?:/\d+)?\]', 1) as bigint) as rank,
       not regexp_matches(text, '^(?:\s*what\(\):\s+|[A-Za-z_]\w*(?:\.\w+)+:\s+|\d{4}-\d\d-\d\d[ T][\d:.,]+\s+)?\[PG') as without_pg
from events
where rank is null and (starts_with(text, '[') or starts_with(ltrim(text), 'what():') or regexp_matches(text, '^(?:[A-Za-z_]\w*(?:\.\w+)+:|\d{4}-\d\d-\d\d[ T][\d:.,]+)\s+\['))
  and regexp_matches(text, '^(?:\s*what\(\):\s+|[A-Za-z_]\w*(?:\.\w+)+:\s+|\d{4}-\d\d-\d\d[ T][\d:.,]+\s+)?\[(?:PG (?:ID )?0 (?:PG GUID [^ \]]* |\([^)]*\) )?)?[Rr]ank:? ?\d+(?:/\d+)?\]');

-- A script's own print that starts with its rank (`Rank 0: building model`, `... [eval] rank 2:
-- gathering ...`, `rank 3 len(log_vars): 11`, `Rank  1 , epoch  0 :  0.62`, a bare `rank 0`): after a
-- time, a level and bracketed tags at most, `rank N` opens the message.
insert into inline_rank_lines
select file, line, text, cast(regexp_extract(text, '^[\d\-/:,. T]*(?:(?:INFO|WARNING|ERROR|DEBUG|\||-)\s*)*(?:\[[^\]]*\]\s*)*[Rr]ank *(\d+)(?:/\d+)?(?:\s*[:,]\s|\s|\s*$)', 1) as bigint), false
from events
where rank is null and contains(lower(text), 'rank') and regexp_matches(text, '^[\d\-/:,. T]*(?:(?:INFO|WARNING|ERROR|DEBUG|\||-)\s*)*(?:\[[^\]]*\]\s*)*[Rr]ank *(\d+)(?:/\d+)?(?:\s*[:,]\s|\s|\s*$)')
  and (file, line, text) not in (select file, line, text from inline_rank_lines);

-- Megatron's NaN check names the rank whose gradients it checked (`Rank 13: found NaN ...`, `...
-- Unexpected result nan on rank 6 at iteration #212`), in lines no prefix may have marked.
insert into inline_rank_lines
select file, line, text, cast(regexp_extract(text, '(?:^|: |on )[Rr]ank (\d+)', 1) as bigint), false
from events
where rank is null and kind = 'megatron_nan_check' and regexp_matches(text, '(?:^|: |on )[Rr]ank \d+')
  and (file, line, text) not in (select file, line, text from inline_rank_lines);

-- pytorch/examples' DDP tutorial series (and the scripts copied from it) open every print with
-- `[GPU{rank}]`: the rank (single node: the process's device; multinode.py: the global rank).
-- A reading, said so in the report.
insert into inline_rank_lines
select file, line, text, cast(regexp_extract(text, '^\[GPU(\d+)\] ', 1) as bigint), false
from events
where rank is null and starts_with(text, '[GPU') and regexp_matches(text, '^\[GPU\d+\] \S')
  and (file, line, text) not in (select file, line, text from inline_rank_lines);

-- A script's own print opening with its process index (`[proc 1] training_step ...`, `[process 3]`):
-- the index spawn and the launchers give each rank (a reading, said so in the report).
insert into inline_rank_lines
select file, line, text, cast(regexp_extract(text, '^\[(?:[Pp]roc|[Pp]rocess) ?(\d+)\] ', 1) as bigint), false
from events
where rank is null and (starts_with(text, '[proc') or starts_with(text, '[Proc'))
  and regexp_matches(text, '^\[(?:[Pp]roc|[Pp]rocess) ?\d+\] \S')
  and (file, line, text) not in (select file, line, text from inline_rank_lines);

update events e set rank = i.rank from inline_rank_lines i where e.file = i.file and e.line = i.line and e.text = i.text;

-- How the report read the markers it could read two ways (job.rank_readings).
create or replace temp table rank_readings as
select '[Rank r] without a PG' as marker, 'the global rank (the line names no process group: the default one assumed)' as reading,
       count(*) as lines
from inline_rank_lines where without_pg having count(*) > 0;

insert into rank_readings
select '[GPUn] opening a print', 'the rank (pytorch/examples'' DDP tutorial prints [GPU{rank}]; on one node also the device)', count(*)
from inline_rank_lines where starts_with(text, '[GPU') having count(*) > 0;

insert into rank_readings
select '[proc n] opening a print', 'the rank (the process index spawn and the launchers give each rank)', count(*)
from inline_rank_lines where (starts_with(text, '[proc') or starts_with(text, '[Proc'))
  and regexp_matches(text, '^\[(?:[Pp]roc|[Pp]rocess) ?\d+\] ') having count(*) > 0;
