-- v2: two incident columns the questions need, backfilled from what v1 already stored.
--   last_event_at  the job's last timestamped log line: when the incident happened, so a backlog of
--                  old logs ingested today lands in the right week/month (analysed_at cannot say).
--   divergence_op  the op of the first divergence group that issued one, for "jobs like this one".

ALTER TABLE incidents ADD COLUMN last_event_at TIMESTAMPTZ;
ALTER TABLE incidents ADD COLUMN divergence_op VARCHAR;

UPDATE incidents SET last_event_at = (SELECT max(e.ts) FROM events e WHERE e.job_key = incidents.job_key);

UPDATE incidents SET divergence_op =
    list_filter(json_extract_string(report_json, '$.divergence.groups[*].op'), lambda op: op IS NOT NULL)[1];
