-- Shift the year-less times of table {table} (rows joined to their line in events).
update {table} t set ts = t.ts + to_years(y.years)
from year_shift y, events e
where y.years <> 0 and t.file = y.file and e.file = t.file and e.line = t.line
  and (e.ts_inferred like '%year%' or (e.ts_inferred = 'carried' and year(e.ts) = y.undated_year));
