-- similar_jobs: for each job, the other jobs with the same verdict kind that either blamed a common
-- host or diverged in the same collective op.
--   correlator sql "select similar_job_id, shared_culprit_hosts, shared_divergence_op from similar_jobs where job_id = '8812'"
CREATE OR REPLACE VIEW similar_jobs AS
SELECT a.job_key,
       a.job_id,
       a.kind,
       b.job_key AS similar_job_key,
       b.job_id AS similar_job_id,
       coalesce(b.last_event_at, b.analysed_at) AS similar_happened_at,
       list_sort(list_intersect(a.culprit_hosts, b.culprit_hosts)) AS shared_culprit_hosts,
       CASE WHEN a.divergence_op = b.divergence_op THEN a.divergence_op END AS shared_divergence_op
FROM incidents a
JOIN incidents b ON a.kind = b.kind AND a.job_key <> b.job_key
WHERE len(list_intersect(a.culprit_hosts, b.culprit_hosts)) > 0
   OR a.divergence_op = b.divergence_op
ORDER BY a.job_key, similar_happened_at DESC;
