-- A tee'd local rank read as a global one (identity.sql: local_role_ranks) becomes the global rank.
update {table} t set local_rank = l.local_rank, rank = l.rank
from local_role_ranks l
where t.file = l.file and t.rank = l.local_rank
  and t.rank not in (select rank from local_role_ranks g where g.file = t.file);

-- Fill the null ranks of table {table} from the identity links (see identity.sql).
update {table} t set rank = coalesce(
    (select rank from rank_by_pid p where p.host = t.host and p.pid = t.pid),
    (select rank from rank_by_pid_alone p where p.pid = t.pid),
    (select rank from rank_by_host_local l where l.host = t.host and l.local_rank = t.local_rank),
    (select rank from rank_by_file_local l where l.file = t.file and l.local_rank = t.local_rank),
    (select rank from rank_by_local l where l.local_rank = t.local_rank),
    (select rank from rank_by_file f where f.file = t.file),
    (select rank from one_rank_world))
where t.rank is null;

-- A rank's host, where the rank's own start-up line or process named it.
update {table} t set host = (select any_value(host) from processes p where p.rank = t.rank and p.host is not null)
where t.host is null and t.rank is not null;
