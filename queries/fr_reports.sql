-- The Flight Recorder analyzer's report pasted as text (parsers/formats/fr_analyzer.toml): a head
-- line per problem collective, then its fields; a field belongs to the last head above it in its
-- file. Each record becomes what the analyzer read from the dumps: a collectives row (counter
-- fr_seq, the analyzer's `collective_seq_id`) per rank that issued it, with the culprit's own op
-- where it found another, and a desync row naming the ranks it found missing.
create or replace macro fr_op(name) as case lower(name)
    when 'all_reduce' then 'ALLREDUCE' when 'allreduce' then 'ALLREDUCE'
    when 'all_gather' then 'ALLGATHER' when 'allgather' then 'ALLGATHER'
    when '_all_gather_base' then '_ALLGATHER_BASE' when 'all_gather_into_tensor' then '_ALLGATHER_BASE'
    when 'reduce_scatter' then 'REDUCE_SCATTER'
    when '_reduce_scatter_base' then '_REDUCE_SCATTER_BASE' when 'reduce_scatter_tensor' then '_REDUCE_SCATTER_BASE'
    when 'all_to_all' then 'ALLTOALL' when 'all_to_all_single' then 'ALLTOALL_BASE'
    else upper(name) end;

create or replace macro fr_rank_list(text) as
    list_transform(regexp_extract_all(text, '\d+'), lambda x: cast(x as bigint));

create or replace temp table fr_reports as
with lines as (
    select file, line, kind, trim(text) as text,
           max(case when kind = 'fr_report_head' then line end)
               over (partition by file order by line rows between unbounded preceding and current row) as head
    from events where kind in ('fr_report_head', 'fr_report_field')
), records as (
    select file, head,
           any_value(text) filter (where kind = 'fr_report_head') as head_text,
           any_value(regexp_extract(text, '^group info: (\d+)', 1)) filter (where starts_with(text, 'group info: ')) as pg,
           any_value(regexp_extract(text, '^collective: (?:\w+:)?(\w+)', 1)) filter (where starts_with(text, 'collective: ')) as op_name,
           any_value(regexp_extract(text, '^missing ranks: (.*)$', 1)) filter (where starts_with(text, 'missing ranks: ')) as missing,
           any_value(regexp_extract(text, '^expected ranks: (.*)$', 1)) filter (where starts_with(text, 'expected ranks: ')) as expected,
           any_value(regexp_extract(text, 'Culprit rank (\d+)', 1)) filter (where starts_with(text, 'error msg: ')) as culprit,
           any_value(regexp_extract(text, 'found collective type: .(\w+).', 1)) filter (where starts_with(text, 'error msg: ')) as found_op
    from lines where head is not null group by file, head
)
select file, head as line, cast(regexp_extract(head_text, '(\d+)', 1) as bigint) as seq, coalesce(pg, '0') as pg,
       op_name, coalesce(fr_rank_list(missing), []) as missing,
       -- `expected ranks: {0, 1}` lists them; `expected ranks: 8` (older analyzers) counts them
       case when expected like '{%' then fr_rank_list(expected)
            else range(0, coalesce(try_cast(expected as bigint), 0)) end as expected,
       try_cast(culprit as bigint) as culprit, found_op
from records where head_text is not null;

insert into collectives (file, line, rank, pg, counter, seq, op, state)
select file, line, r, pg, 'fr_seq', seq,
       fr_op(case when r = culprit then coalesce(found_op, op_name) else op_name end),
       -- the others wait in a collective some ranks never joined: as good as timed out in it
       case when len(missing) > 0 then 'timeout' else 'issued' end
from fr_reports, unnest(expected) as t(r)
where not list_contains(missing, r);

insert into desync (file, line, ranks, verdict, seq, next, pg)
select file, line, array_to_string(missing, ', '), 'not_joined', seq - 1, seq, pg
from fr_reports where len(missing) > 0;
