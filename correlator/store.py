"""The history store: every analysed job in one DuckDB file, queryable across jobs.

Layout: `incidents` (one row per job: the verdict and the report) and one table per job table of
`correlator.tables` with a leading `job_key` column. A job is identified by `job_key` =
`<job id>-<12 hex of sha256(absolute log dir)>`, so re-ingesting the same directory replaces it while
two directories that reuse a scheduler job id stay apart.

The schema is versioned: `meta.schema_version` and ordered migrations in `store_sql/migrations/NNN_*.sql`;
opening an older file migrates it. Tables and columns that `correlator.tables` gains later are added on open
without a migration file (additions only). The views of `store_sql/views/*.sql` answer the common questions;
they and the additions are redone whenever their definitions change (tracked by `meta.definitions_sha256`).

DuckDB lets one process write a file (or several only read it); a connection that finds the file locked
retries for a bounded time, then raises `StoreBusy`. Every ingest is one transaction, so a crash or a
kill leaves the previous content intact.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from correlator.tables import SCHEMAS, TABLES, conform, empty

SQL_DIR = Path(__file__).parent / "store_sql"
MIGRATIONS_DIR = SQL_DIR / "migrations"
VIEWS_DIR = SQL_DIR / "views"
DEFAULT_TIMEOUT_S = 30.0
EXPORT_MARKER = "_correlator_export.json"  # leading underscore: Spark and Trino skip it when listing data files


class StoreError(Exception):
    """A failure the user can act on; the message is one line."""


class StoreBusy(StoreError):
    """Another process held the database lock for longer than the timeout."""


class JobNotFound(StoreError):
    pass


class AnalysisLike(Protocol):
    job_dir: Path
    job_id: str
    tables: Mapping[str, pa.Table]
    report: dict


def default_db_path() -> Path:
    if os.environ.get("CORRELATOR_DB"):
        return Path(os.environ["CORRELATOR_DB"])
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "correlator" / "history.duckdb"


def job_key(job_id: str, log_dir: Path) -> str:
    dir_hash = hashlib.sha256(str(Path(log_dir).resolve()).encode()).hexdigest()[:12]
    return f"{job_id}-{dir_hash}"


# --- schema -------------------------------------------------------------------------------------

def _migrations() -> list[tuple[int, Path]]:
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        found.append((int(path.name.split("_", 1)[0]), path))
    return found


SCHEMA_VERSION = _migrations()[-1][0]


def _views_sql() -> str:
    return "\n".join(path.read_text() for path in sorted(VIEWS_DIR.glob("*.sql")))


def _definitions_sha256() -> str:
    """Changes when the views or the Arrow schemas change: then the derived parts of the store are redone."""
    schemas = "\n".join(f"{name}: {SCHEMAS[name]}" for name in TABLES)
    return hashlib.sha256((_views_sql() + schemas).encode()).hexdigest()


def _meta(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    has_meta = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'meta' AND schema_name = 'main'"
    ).fetchone()[0]
    if not has_meta:
        return {}
    return dict(con.execute("SELECT key, value FROM meta").fetchall())


def _is_current(con: duckdb.DuckDBPyConnection) -> bool:
    meta = _meta(con)
    version = int(meta.get("schema_version", 0))
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the history database has schema v{version}, newer than this correlator's v{SCHEMA_VERSION}; upgrade correlator"
        )
    return version == SCHEMA_VERSION and meta.get("definitions_sha256") == _definitions_sha256()


def _set_meta(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("DELETE FROM meta WHERE key = ?", [key])
    con.execute("INSERT INTO meta VALUES (?, ?)", [key, value])


def _follow_arrow_schemas(con: duckdb.DuckDBPyConnection) -> None:
    """Add the tables and columns that tables.py gained since the migrations were written.

    Additions are safe to apply blindly (the report contract only ever adds fields); a rename, a removal
    or a type change needs a migration file. DuckDB maps the Arrow types, so both sides always agree.
    """
    existing = {}
    for table, column in con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE schema_name = 'main'").fetchall():
        existing.setdefault(table, set()).add(column)
    for name in TABLES:
        con.register("arrow_schema", empty(name))
        wanted = [(row[0], row[1]) for row in con.execute("DESCRIBE SELECT * FROM arrow_schema").fetchall()]
        con.unregister("arrow_schema")
        if name not in existing:
            columns = ", ".join(f'"{column}" {type_}' for column, type_ in wanted)
            con.execute(f"CREATE TABLE {name} (job_key VARCHAR NOT NULL, {columns})")
            continue
        for column, type_ in wanted:
            if column not in existing[name]:
                con.execute(f'ALTER TABLE {name} ADD COLUMN "{column}" {type_}')


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Bring the schema, the job tables and the views up to date, all in one transaction."""
    if _is_current(con):
        return
    version = int(_meta(con).get("schema_version", 0))  # 0: a new file
    con.execute("BEGIN TRANSACTION")
    try:
        for number, path in _migrations():
            if number > version:
                con.execute(path.read_text())
                _set_meta(con, "schema_version", str(number))
        _follow_arrow_schemas(con)
        con.execute(_views_sql())
        _set_meta(con, "definitions_sha256", _definitions_sha256())
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


# --- connections --------------------------------------------------------------------------------

def _timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    return float(os.environ.get("CORRELATOR_DB_TIMEOUT", DEFAULT_TIMEOUT_S))


def first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _connect(db_path: Path, *, read_only: bool, timeout: float) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting (with jittered backoff) while another process holds its lock."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(db_path), read_only=read_only)
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise StoreError(f"cannot open {db_path}: {first_line(error)}") from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                holder = re.search(r"PID \d+", str(error))
                raise StoreBusy(
                    f"history database {db_path} is busy: another process"
                    f"{f' ({holder.group(0)})' if holder else ''} holds its lock; gave up after {timeout:g} s"
                    " (set CORRELATOR_DB_TIMEOUT to wait longer)"
                ) from None
            time.sleep(min(remaining, delay * random.uniform(0.5, 1.5)))
            delay = min(delay * 2, 1.0)
        else:
            con.execute("SET TimeZone = 'UTC'")  # months and weeks in the views are UTC
            return con


def _upgrade(db_path: Path, timeout: float) -> None:
    con = _connect(db_path, read_only=False, timeout=timeout)
    try:
        _migrate(con)
    finally:
        con.close()


def _connect_current(db_path: Path, *, read_only: bool, timeout: float) -> duckdb.DuckDBPyConnection:
    """A connection to an up-to-date schema; an outdated file is first migrated through a writable connection."""
    con = _connect(db_path, read_only=read_only, timeout=timeout)
    try:
        if not read_only:
            _migrate(con)
            return con
        if _is_current(con):
            return con
    except BaseException:
        con.close()
        raise
    con.close()
    _upgrade(db_path, timeout)
    return _connect(db_path, read_only=True, timeout=timeout)


@contextmanager
def _open(db_path: Path | None, *, write: bool, timeout: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to an up-to-date store; read-only unless `write`."""
    db_path = Path(db_path) if db_path else default_db_path()
    if not write and not db_path.exists():
        raise StoreError(f"no history database at {db_path} (run `correlator ingest JOB_DIR` first)")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    con = _connect_current(db_path, read_only=not write, timeout=_timeout(timeout))
    try:
        yield con
    finally:
        con.close()


# --- ingest -------------------------------------------------------------------------------------

def _correlator_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("correlator")
    except PackageNotFoundError:
        return "unknown"


def content_hash(files: pa.Table) -> str:
    """sha256 of the log files as the analysis saw them: sorted (path, bytes, mtime) of the files table."""
    rows = sorted(
        (row["path"], row["bytes"], row["mtime"].isoformat() if row["mtime"] else None)
        for row in conform("files", files).select(["path", "bytes", "mtime"]).to_pylist()
    )
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def _last_event_at(events: pa.Table) -> datetime | None:
    return pc.max(conform("events", events).column("ts")).as_py()


def _divergence_op(divergence: dict | None) -> str | None:
    ops = [group.get("op") for group in (divergence or {}).get("groups") or []]
    return next((op for op in ops if op is not None), None)


def _incident(analysis: AnalysisLike, key: str, log_dir: Path) -> dict[str, Any]:
    report = analysis.report
    verdict = report.get("verdict") or {}
    stalled = report.get("first_stalled") or {}
    divergence = report.get("divergence") or {}
    return {
        "job_key": key,
        "job_id": analysis.job_id,
        "log_dir": str(log_dir),
        "content_hash": content_hash(analysis.tables["files"]),
        "analysed_at": datetime.now(timezone.utc),
        "kind": verdict.get("kind"),
        "culprit_ranks": verdict.get("culprit_ranks") or [],
        "culprit_hosts": verdict.get("culprit_hosts") or [],
        "confidence": verdict.get("confidence"),
        "world_size": (report.get("job") or {}).get("world_size"),
        "first_stalled_rank": stalled.get("rank"),
        "first_stalled_pg": stalled.get("pg"),
        "first_stalled_seq": stalled.get("last_seq"),
        "divergence_pg": divergence.get("pg"),
        "divergence_seq": divergence.get("seq"),
        "summary": verdict.get("summary"),
        "report_json": json.dumps(report),
        "correlator_version": _correlator_version(),
        "report_schema_version": report.get("schema_version"),
        "last_event_at": _last_event_at(analysis.tables["events"]),
        "divergence_op": _divergence_op(divergence),
    }


def ingest(analysis: AnalysisLike, db_path: Path | None = None, *, timeout: float | None = None) -> str:
    """Store the job's tables and verdict, replacing an earlier ingest of the same job; returns its job_key."""
    with _open(db_path, write=True, timeout=timeout) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            key = insert_job(con, analysis)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return key


def insert_job(con: duckdb.DuckDBPyConnection, analysis: AnalysisLike) -> str:
    """The job's rows and incident into a connection with the store's schema, replacing the job's
    earlier rows (the caller holds the transaction); returns its job_key. The lake writes a job
    through this too, so both keep the same columns and types."""
    log_dir = Path(analysis.job_dir).resolve()
    key = job_key(analysis.job_id, log_dir)
    incident = _incident(analysis, key, log_dir)
    for name in TABLES:
        incoming = conform(name, analysis.tables[name])
        con.execute(f"DELETE FROM {name} WHERE job_key = ?", [key])
        con.register("incoming", incoming)
        con.execute(f"INSERT INTO {name} BY NAME SELECT ?::VARCHAR AS job_key, * FROM incoming", [key])
        con.unregister("incoming")
    con.execute("DELETE FROM incidents WHERE job_key = ?", [key])
    columns = ", ".join(incident)
    placeholders = ", ".join("?" for _ in incident)
    con.execute(f"INSERT INTO incidents ({columns}) VALUES ({placeholders})", list(incident.values()))
    return key


def schema_in(con: duckdb.DuckDBPyConnection) -> None:
    """The store's tables (empty) and views on any connection (the lake's in-memory ones)."""
    con.execute("SET TimeZone = 'UTC'")
    _migrate(con)


# --- reading ------------------------------------------------------------------------------------

def query(db_path: Path | None, sql: str, write: bool = False, *, timeout: float | None = None) -> tuple[list[str], list[tuple]]:
    """Run `sql` (the last statement's result is returned); read-only unless `write`."""
    if not _has_statement(sql):
        raise StoreError("empty query: give a SQL statement, e.g. correlator sql \"select * from incidents\"")
    with _open(db_path, write=write, timeout=timeout) as con:
        try:
            cursor = con.execute(sql)
        except duckdb.Error as error:
            raise StoreError(first_line(error)) from None
        if cursor is None or cursor.description is None:
            return [], []
        return [column[0] for column in cursor.description], cursor.fetchall()


def _has_statement(sql: str) -> bool:
    """Whether `sql` holds anything but blanks, `;` and comments (DuckDB returns no cursor for those)."""
    text = re.sub(r"--[^\n]*|/\*.*?(\*/|$)", " ", sql, flags=re.S)
    return bool(text.replace(";", " ").strip())


HISTORY_COLUMNS = (
    "job_id", "analysed_at", "kind", "culprit_ranks", "culprit_hosts", "confidence",
    "world_size", "summary", "log_dir", "job_key",
)


def history(db_path: Path | None = None, *, timeout: float | None = None) -> list[dict[str, Any]]:
    """One dict per ingested job, most recently analysed first."""
    columns, rows = query(db_path, f"SELECT {', '.join(HISTORY_COLUMNS)} FROM incidents ORDER BY analysed_at DESC", timeout=timeout)
    return [dict(zip(columns, row)) for row in rows]


def load_report(db_path: Path | None, job_id_or_key: str, *, timeout: float | None = None) -> dict:
    """The stored report of a job, by job_key or by job id (which must then name one log dir)."""
    with _open(db_path, write=False, timeout=timeout) as con:
        matches = con.execute(
            "SELECT job_key, job_id, report_json FROM incidents WHERE job_key = ? OR job_id = ? ORDER BY job_key",
            [job_id_or_key, job_id_or_key],
        ).fetchall()
    exact = [row for row in matches if row[0] == job_id_or_key]
    if exact:
        matches = exact
    if not matches:
        raise JobNotFound(f"no job {job_id_or_key!r} in the history (`correlator history` lists them)")
    if len(matches) > 1:
        keys = ", ".join(row[0] for row in matches)
        raise StoreError(f"job id {job_id_or_key!r} names {len(matches)} log dirs; pass one job key: {keys}")
    return json.loads(matches[0][2])


# --- export -------------------------------------------------------------------------------------

def _claim_export_dir(out_dir: Path) -> None:
    """Accept a new/empty directory or a previous export (replaced table by table); refuse anything else."""
    if out_dir.exists() and not out_dir.is_dir():
        raise StoreError(f"{out_dir} is a file, not a directory; choose an empty directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreError(f"cannot create {out_dir}: {error.strerror or first_line(error)}") from None
    marker = out_dir / EXPORT_MARKER
    if marker.exists():
        for name in ("incidents", *TABLES):
            shutil.rmtree(out_dir / name, ignore_errors=True)
    elif any(out_dir.iterdir()):
        raise StoreError(f"{out_dir} is not empty and is not a previous correlator export; choose an empty directory")
    # Written first so an interrupted export can be redone into the same directory.
    marker.write_text(json.dumps({"complete": False}) + "\n")


PARTITION = "month"
# The month (UTC) an incident happened in, as the views count it: its last log line, else its analysis.
INCIDENT_MONTH = "strftime(coalesce(i.last_event_at, i.analysed_at), '%Y-%m')"
EMPTY_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # Hive's name for a null partition value (DuckDB, Spark, Trino read it so)


def _export_select(name: str) -> str:
    month = f"{INCIDENT_MONTH} AS {PARTITION}"
    if name == "incidents":
        return f"SELECT i.*, {month} FROM incidents i"
    return f"SELECT t.*, {month} FROM {name} t JOIN incidents i USING (job_key)"


def export_parquet(db_path: Path | None, out_dir: Path, *, timeout: float | None = None) -> dict[str, int]:
    """Write every table as Hive-partitioned Parquet, `out_dir/<table>/month=YYYY-MM/*.parquet`.

    Partitioned by the month the incident happened in (UTC, of its last log line, else of its analysis:
    the months of the views), rather than by job: the partition count stays bounded (one per month instead
    of one per job, which Hive metastores and Spark's file listing handle poorly), files stay large, and
    "incidents since March" prunes partitions. Rows are sorted by job_key so Parquet row-group statistics
    still make one-job lookups cheap. A table with no rows is written too, as one empty file under
    `month=__HIVE_DEFAULT_PARTITION__` (a null month), so a query over `<table>/**` finds its columns
    instead of no file. `_correlator_export.json` records the row counts and says whether the export
    completed. Returns the row count per table.
    """
    out_dir = Path(out_dir)
    counts = {}
    with _open(db_path, write=False, timeout=timeout) as con:
        _claim_export_dir(out_dir)
        for name in ("incidents", *TABLES):
            counts[name] = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
            target = str(out_dir / name).replace("'", "''")
            if counts[name]:
                con.execute(
                    f"COPY ({_export_select(name)} ORDER BY job_key) TO '{target}' (FORMAT parquet, PARTITION_BY ({PARTITION}))"
                )
            else:
                (out_dir / name / f"{PARTITION}={EMPTY_PARTITION}").mkdir(parents=True)
                con.execute(f"COPY (SELECT * FROM {name} LIMIT 0) TO '{target}/{PARTITION}={EMPTY_PARTITION}/data_0.parquet' "
                            "(FORMAT parquet)")
        version = _meta(con)["schema_version"]
    marker = {"complete": True, "schema_version": int(version), "exported_at": datetime.now(timezone.utc).isoformat(),
              "partitioned_by": f"{PARTITION}: the month (UTC) of the incident's last log line, else of its analysis",
              "rows": counts}
    (out_dir / EXPORT_MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    return counts
