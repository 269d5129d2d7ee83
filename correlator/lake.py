"""The history as a Parquet lake: every job's tables and incident row as Hive-partitioned Parquet
in a directory (local or a shared filesystem), for DuckDB here and for Spark or Trino elsewhere.

Layout (the store's export layout, one directory per job inside each month):

    DIR/<table>/month=YYYY-MM/job=<job key>/part-0.parquet     incidents and every job table
    DIR/_staging/<nonce>/...                                     a job being written aside
    DIR/_correlator_lake.json                                    says DIR is a lake

Columns are the store's (a leading `job_key`, the incident's columns), written through the store's
own `insert_job` into an in-memory DuckDB, so the lake and the store cannot drift apart. `month`
is the month (UTC) the incident happened in, as the store's views count it. Names that start
with `_` are skipped by DuckDB, Spark and Trino when they list data files.

A job lands whole: its files are written under `_staging/`, `_PUBLISH` is written once they are
all complete, then each table's job directory is renamed into place (the incident's first out and
last in, so correlator's views, which only show jobs with an incident row, never see half a job).
A writer killed before `_PUBLISH` leaves only its staging directory, removed by the next writer;
one killed while publishing is finished by the next writer (`recover`). Re-ingesting a job
replaces it, whatever month it was in. Writers lock `_correlator_lake.lock` (flock: a local or
shared POSIX filesystem) only to publish and recover; they write their staging in parallel.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from . import store
from .tables import TABLES

MARKER = "_correlator_lake.json"
LOCK = "_correlator_lake.lock"
STAGING = "_staging"
PUBLISH = "_PUBLISH"
WRITING = "_writing.lock"
INCIDENTS = "incidents"
PART = "part-0.parquet"
MONTH = re.compile(r"^\d{4}-\d{2}$")
JOB_ID_CHARS = 100


class LakeError(store.StoreError):
    """A lake that cannot be written or read; the message is one line."""


def partition_name(key: str) -> str:
    """The job key as a directory name: log text (a job id taken from a directory's name) never
    drives the file system, so only [A-Za-z0-9._-] stay, no leading dot, and the key's hash part
    (which keeps two jobs apart) survives any cut."""
    job_id, _, digest = key.rpartition("-")
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", job_id).lstrip(".")[:JOB_ID_CHARS] or "job"
    return f"{safe}-{re.sub(r'[^0-9a-f]', '_', digest)}"


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


# --- writing ------------------------------------------------------------------------------------

def claim(lake: Path) -> None:
    """Accept a new or empty directory, or a lake; refuse anything else (one line)."""
    lake = Path(lake)
    if lake.exists() and not lake.is_dir():
        raise LakeError(f"{lake} is a file, not a directory; choose an empty directory for the lake")
    try:
        lake.mkdir(parents=True, exist_ok=True)
        if not (lake / MARKER).exists():
            if any(lake.iterdir()):
                raise LakeError(f"{lake} is not empty and is not a correlator lake; choose an empty directory")
            (lake / MARKER).write_text(json.dumps({"layout": 1, "tables": [INCIDENTS, *TABLES]}) + "\n")
        (lake / STAGING).mkdir(exist_ok=True)
    except OSError as error:
        raise LakeError(f"cannot write the lake {lake}: {error.strerror or store.first_line(error)}") from None


@contextmanager
def _locked(path: Path, blocking: bool = True) -> Iterator[bool]:
    """An exclusive flock on `path` (created), released when the holder ends, even by a kill."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def write_job(lake: Path, analysis: store.AnalysisLike) -> str:
    """Write the job's tables and incident into the lake, replacing an earlier ingest of the same
    job, all or nothing; returns its job_key."""
    lake = Path(lake)
    claim(lake)
    stage = lake / STAGING / uuid.uuid4().hex
    try:
        stage.mkdir()
        with _locked(stage / WRITING):
            key = _stage(stage, analysis)
            with _locked(lake / LOCK):
                recover(lake, held=True)
                _publish(lake, stage)
    except OSError as error:
        shutil.rmtree(stage, ignore_errors=True)
        raise LakeError(f"cannot write the lake {lake}: {error.strerror or store.first_line(error)}") from None
    return key


def _stage(stage: Path, analysis: store.AnalysisLike) -> str:
    """Every table of the job (empty ones too: each table's directory is then the sign of a
    publish not yet done, and Spark and Trino find its columns) under `stage`, then `_PUBLISH`."""
    con = duckdb.connect(config={"temp_directory": str(stage / "_spill"), "memory_limit": store_memory()})
    try:
        store.schema_in(con)
        key = store.insert_job(con, analysis)
        month = con.execute(f"SELECT {store.INCIDENT_MONTH} FROM incidents i").fetchone()[0]
        month = month if month and MONTH.match(month) else store.EMPTY_PARTITION
        job = partition_name(key)
        for name in (INCIDENTS, *TABLES):
            where = stage / name / f"month={month}" / f"job={job}"
            where.mkdir(parents=True)
            con.execute(f"COPY (SELECT * FROM {name}) TO '{_sql_path(where / PART)}' (FORMAT parquet)")
    finally:
        con.close()
    shutil.rmtree(stage / "_spill", ignore_errors=True)
    (stage / PUBLISH).write_text(json.dumps({"job_key": key, "job": job, "month": month}) + "\n")
    return key


def store_memory() -> str:
    return os.environ.get("CORRELATOR_MEMORY_LIMIT", "1GB")


def _staged(stage: Path, name: str, info: dict) -> Path:
    return stage / name / f"month={info['month']}" / f"job={info['job']}"


def _remove_job(lake: Path, name: str, job: str) -> None:
    for old in (lake / name).glob(f"month=*/job={job}"):
        shutil.rmtree(old)


def _publish(lake: Path, stage: Path) -> None:
    """Move a complete staging directory into place. Redone from any point after a kill: a
    table whose staged directory is still there is not moved yet."""
    info = json.loads((stage / PUBLISH).read_text())
    incident = _staged(stage, INCIDENTS, info)
    if incident.exists():  # the old incident goes first: the job leaves the views while it changes
        _remove_job(lake, INCIDENTS, info["job"])
    for name in (*TABLES, INCIDENTS):
        staged = _staged(stage, name, info)
        if not staged.exists():
            continue
        _remove_job(lake, name, info["job"])
        month_dir = lake / name / f"month={info['month']}"
        month_dir.mkdir(parents=True, exist_ok=True)
        os.rename(staged, month_dir / f"job={info['job']}")
    shutil.rmtree(stage)


def recover(lake: Path, held: bool = False) -> None:
    """Finish the publishes of killed writers and remove their unfinished staging; a staging
    directory whose writer still runs (its flock held) is left alone."""
    if not held:
        with _locked(lake / LOCK):
            return recover(lake, held=True)
    for stage in sorted((lake / STAGING).glob("*")):
        with _locked(stage / WRITING, blocking=False) as ours:
            if not ours:
                continue
            if (stage / PUBLISH).exists():
                _publish(lake, stage)
            else:
                shutil.rmtree(stage)


# --- reading ------------------------------------------------------------------------------------

def _files(lake: Path, name: str) -> str:
    return _sql_path(lake / name / "month=*" / "job=*" / "*.parquet")


def connect(lake: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose tables are views over the lake's Parquet (with a `month` column,
    the partition) and whose views are the store's; only published jobs (with an incident row)."""
    lake = Path(lake)
    if not (lake / MARKER).exists():
        raise LakeError(f"no lake at {lake} (run `correlator ingest JOB_DIR --lake {lake}` first)")
    con = duckdb.connect(config={"memory_limit": store_memory()})
    store.schema_in(con)  # the empty tables stand for those the lake has no file of yet
    options = "hive_partitioning = true, hive_types = {'month': VARCHAR, 'job': VARCHAR}, union_by_name = true"
    for name in (INCIDENTS, *TABLES):
        if not any((lake / name).glob("month=*/job=*/*.parquet")):
            continue
        where = "" if name == INCIDENTS else " WHERE job_key IN (SELECT job_key FROM incidents)"
        con.execute(f"DROP TABLE {name}")
        con.execute(f"CREATE VIEW {name} AS SELECT * EXCLUDE (job) FROM read_parquet('{_files(lake, name)}', "
                    f"{options}){where}")
    con.execute(store._views_sql())  # bound again, to the lake's views
    return con


def query(lake: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run `sql` over the lake (the last statement's result is returned)."""
    if not store._has_statement(sql):
        raise LakeError("empty query: give a SQL statement, e.g. correlator sql --lake DIR \"select * from incidents\"")
    con = connect(lake)
    try:
        try:
            cursor = con.execute(sql)
        except duckdb.Error as error:
            raise LakeError(store.first_line(error)) from None
        if cursor is None or cursor.description is None:
            return [], []
        return [column[0] for column in cursor.description], cursor.fetchall()
    finally:
        con.close()


def history(lake: Path) -> list[dict[str, Any]]:
    """One dict per job in the lake, most recently analysed first."""
    columns, rows = query(lake, f"SELECT {', '.join(store.HISTORY_COLUMNS)} FROM incidents ORDER BY analysed_at DESC")
    return [dict(zip(columns, row)) for row in rows]
