-- culprit_hosts_by_month: which nodes keep initiating failures, month by month.
--   correlator sql "select * from culprit_hosts_by_month where month >= '2026-01' order by incidents desc"
-- month = month (UTC) of the job's last log line, or of the analysis when the logs carry no time.
CREATE OR REPLACE VIEW culprit_hosts_by_month AS
SELECT strftime(happened_at, '%Y-%m') AS month,
       host,
       count(*) AS incidents,
       list(DISTINCT kind ORDER BY kind) AS kinds,
       list(job_id ORDER BY happened_at) AS job_ids
FROM (
    SELECT coalesce(last_event_at, analysed_at) AS happened_at, kind, job_id, unnest(culprit_hosts) AS host
    FROM incidents
)
GROUP BY ALL
ORDER BY month, incidents DESC, host;
