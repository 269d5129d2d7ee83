-- recurring_tracebacks: tracebacks grouped by their last line (the exception type and message),
-- most widespread first; answers "have we seen this error before, in which jobs?".
--   correlator sql "select * from recurring_tracebacks where jobs > 1"
-- The launcher's boilerplate is left out: torchrun's ChildFailedError (its summary of the workers
-- that failed, in every failed job) and an agent's SignalException say what followed, not what
-- failed; a traceback cut off after its frames has no exception line to group by.
CREATE OR REPLACE VIEW recurring_tracebacks AS
WITH tracebacks AS (
    SELECT job_key,
           trim(list_filter(string_split(text, chr(10)), lambda l: trim(l) <> '')[-1]) AS last_line
    FROM events
    WHERE kind = 'traceback'
)
SELECT t.last_line,
       count(DISTINCT t.job_key) AS jobs,
       count(*) AS occurrences,
       list(DISTINCT i.job_id ORDER BY i.job_id) AS job_ids,
       list(DISTINCT i.kind ORDER BY i.kind) AS kinds,
       min(coalesce(i.last_event_at, i.analysed_at)) AS first_seen,
       max(coalesce(i.last_event_at, i.analysed_at)) AS last_seen
FROM tracebacks t JOIN incidents i USING (job_key)
WHERE t.last_line IS NOT NULL
  AND NOT regexp_matches(t.last_line, '^(torch\.distributed\.elastic\.[\w.]+\.)?(ChildFailedError|SignalException)\b')
  AND NOT regexp_matches(t.last_line, '^File "[^"]*", line \d+')
GROUP BY t.last_line
ORDER BY jobs DESC, occurrences DESC, t.last_line;
