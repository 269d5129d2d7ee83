-- kinds_by_week: how many incidents of each verdict kind per ISO week (weeks start on Monday, UTC).
--   correlator sql "select * from kinds_by_week where kind <> 'healthy'"
CREATE OR REPLACE VIEW kinds_by_week AS
SELECT CAST(date_trunc('week', coalesce(last_event_at, analysed_at)) AS DATE) AS week,
       kind,
       count(*) AS incidents,
       list(job_id ORDER BY coalesce(last_event_at, analysed_at)) AS job_ids
FROM incidents
GROUP BY ALL
ORDER BY week, incidents DESC, kind;
