-- Shift the year-less times of the events themselves (after the other tables used them to join).
update events e set ts = e.ts + to_years(y.years)
from year_shift y
where y.years <> 0 and e.file = y.file
  and (e.ts_inferred like '%year%' or (e.ts_inferred = 'carried' and year(e.ts) = y.undated_year));
