-- In the default process group (PG 0) the PG-local rank `[Rank r]` is the global rank.
update {table} set rank = pg_rank where rank is null and pg_rank is not null and coalesce(pg, '0') = '0';
