-- What ranks print of the tensors they are about to hand a collective (`local embeddings
-- torch.Size([1568, 256]), calling all_gather`, `gathering scores shape=[410]`, `all_reduce over
-- 209715200 elements`, `len(log_vars): 11`): the line a script prints on every rank is one
-- template up to the size, its numbers aside (what follows the size may differ: a key list, a
-- remark); where most ranks printed one size there last and a few another, those few issued a
-- collective of another size.
create or replace temp table shape_prints as
with sized as (
    select rank, file, line, ts,
           regexp_extract(text, '^(.*?)(?:(?:torch\.Size\(\[|\bshape[=: ]+\[?|\bnumel[=: ]+|\blen\([\w.]*\)[=: ]+)(\d[\d, x]*)|\b(\d+) elements\b)',
                          ['head', 'before', 'after']) as m
    from events
    where rank is not null   -- the words one of which each size print holds, before the regex
      and (contains(text, 'Size([') or contains(text, 'shape') or contains(text, 'numel')
           or contains(text, 'len(') or contains(text, ' elements'))
)
select rank, file, line, ts, trim(coalesce(nullif(m.before, ''), m.after), ' ,') as shape,
       regexp_replace(m.head, '\d+', '#', 'g') || '<shape>' as template
from sized where m.before <> '' or m.after <> '';

create or replace temp table shape_minority as
with last as (
    select * from shape_prints
    qualify row_number() over (partition by rank, template order by ts desc nulls last, file desc, line desc) = 1
), votes as (
    select template, shape, count(*) as n from last group by template, shape
), templates as (
    select template, sum(n) as ranks, max(n) as top from votes group by template having count(*) >= 2 and sum(n) >= 3
), majority as (
    select v.template, v.shape from votes v join templates t using (template) where v.n = t.top and 2 * v.n > t.ranks
)
select l.rank, l.file, l.line, l.shape, m.shape as majority_shape
from last l join majority m using (template) where l.shape <> m.shape;
