-- v1: the incident index and one table per job table of correlator/tables.py, each keyed by job_key.
-- No PRIMARY KEYs: uniqueness of job_key is kept by ingest (delete + insert in one transaction), and
-- DuckDB cannot ALTER a table that carries an index, which would block later migrations.

CREATE TABLE IF NOT EXISTS meta (key VARCHAR NOT NULL, value VARCHAR);

CREATE TABLE incidents (
    job_key               VARCHAR NOT NULL,   -- job_id + '-' + first 12 hex of sha256(absolute log dir)
    job_id                VARCHAR NOT NULL,   -- scheduler job id or directory name
    log_dir               VARCHAR NOT NULL,   -- absolute, symlinks resolved
    content_hash          VARCHAR,            -- sha256 of the files table's sorted (path, bytes, mtime)
    analysed_at           TIMESTAMPTZ NOT NULL,
    kind                  VARCHAR,
    culprit_ranks         BIGINT[],
    culprit_hosts         VARCHAR[],
    confidence            VARCHAR,
    world_size            BIGINT,
    first_stalled_rank    BIGINT,
    first_stalled_pg      VARCHAR,
    first_stalled_seq     BIGINT,
    divergence_pg         VARCHAR,
    divergence_seq        BIGINT,
    summary               VARCHAR,
    report_json           JSON,
    correlator_version    VARCHAR,
    report_schema_version INTEGER             -- the report's own schema_version (report-contract.md)
);

CREATE TABLE files (
    job_key VARCHAR NOT NULL,
    path VARCHAR, kinds VARCHAR[], bytes BIGINT, lines BIGINT, lines_unparsed BIGINT, skip_reason VARCHAR,
    host VARCHAR, rank BIGINT, local_rank BIGINT, mtime TIMESTAMPTZ
);

CREATE TABLE events (
    job_key VARCHAR NOT NULL,
    file VARCHAR, line BIGINT, host VARCHAR, pid BIGINT, rank BIGINT, local_rank BIGINT,
    source VARCHAR, kind VARCHAR, level VARCHAR, ts TIMESTAMPTZ, ts_precision VARCHAR, ts_inferred VARCHAR,
    text VARCHAR
);

CREATE TABLE collectives (
    job_key VARCHAR NOT NULL,
    file VARCHAR, line BIGINT, host VARCHAR, pid BIGINT, rank BIGINT, local_rank BIGINT,
    pg VARCHAR, pg_rank BIGINT, comm VARCHAR, comm_id VARCHAR, counter VARCHAR, seq BIGINT, op VARCHAR,
    numel_in BIGINT, numel_out BIGINT, dtype VARCHAR, state VARCHAR, timeout_ms BIGINT, ts TIMESTAMPTZ
);

CREATE TABLE comms (
    job_key VARCHAR NOT NULL,
    file VARCHAR, line BIGINT, host VARCHAR, pid BIGINT, dev BIGINT,
    comm VARCHAR, comm_id VARCHAR, rank BIGINT, nranks BIGINT, phase VARCHAR, parent VARCHAR, color BIGINT,
    ts TIMESTAMPTZ
);

CREATE TABLE processes (
    job_key VARCHAR NOT NULL,
    file VARCHAR, line BIGINT, host VARCHAR, pid BIGINT, rank BIGINT, local_rank BIGINT,
    task BIGINT, world_size BIGINT, source VARCHAR
);

CREATE TABLE progress (
    job_key VARCHAR NOT NULL,
    file VARCHAR, line BIGINT, host VARCHAR, pid BIGINT, rank BIGINT, local_rank BIGINT,
    step BIGINT, total BIGINT, ts TIMESTAMPTZ
);

CREATE TABLE exits (
    job_key VARCHAR NOT NULL,
    file VARCHAR, line BIGINT, host VARCHAR, pid BIGINT, rank BIGINT, local_rank BIGINT,
    task BIGINT, exit_code BIGINT, signal BIGINT, reason VARCHAR, source VARCHAR, ts TIMESTAMPTZ, text VARCHAR
);
