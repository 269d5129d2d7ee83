"""The Parquet lake (correlator/lake.py), in-process: the store's layout and views over Parquet,
jobs landing whole, replaced on re-ingest, finished or removed after a kill, names sanitised."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from correlator import lake, pipeline, store
from correlator.cli import app
from correlator.tables import TABLES
from lake_compare import lake_contents, lake_rows

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [ROOT / "samples" / "tr-stalled_rank-4" / "logs", ROOT / "samples" / "slurm-oom" / "logs",
           ROOT / "samples" / "tr-crash_exception-4" / "logs"]
VIEWS = ("culprit_hosts_by_month", "kinds_by_week", "similar_jobs", "recurring_tracebacks")


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def analyses():
    return [pipeline.analyze(s, keep_tables=True, window=None) for s in SAMPLES]


@pytest.fixture(scope="module")
def filled(tmp_path_factory, analyses):
    """The same jobs in a lake and in a store."""
    where = tmp_path_factory.mktemp("filled")
    for analysis in analyses:
        lake.write_job(where / "lake", analysis)
        store.ingest(analysis, where / "h.duckdb")
    return where / "lake", where / "h.duckdb"


def _answer(columns_rows):
    columns, found = columns_rows
    return columns, sorted(map(repr, found))


def test_the_lake_answers_the_stores_views_the_same(filled):
    lake_dir, db = filled
    for view in VIEWS:
        assert _answer(lake.query(lake_dir, f"select * from {view}")) == _answer(store.query(db, f"select * from {view}")), view
    assert lake.query(lake_dir, "select sum(incidents) from culprit_hosts_by_month")[1][0][0] == 3


def test_the_lakes_tables_are_the_stores_plus_the_month(filled):
    lake_dir, db = filled
    for name in ("incidents", *TABLES):
        per_run = ", analysed_at" if name == "incidents" else ""  # each ingest's own time
        columns, in_store = store.query(db, f"select * exclude (job_key{per_run}) from {name}")
        lake_columns, in_lake = lake.query(lake_dir, f"select * exclude (month, job_key{per_run}) from {name}")
        assert lake_columns == columns, name
        assert sorted(map(repr, in_lake)) == sorted(map(repr, in_store)), name
    months = lake.query(lake_dir, "select distinct month from events")[1]
    assert months == [("2026-11",)]


def test_the_layout_is_hive_partitioned_by_month_and_job(filled):
    lake_dir, _ = filled
    keys = {row[0] for row in lake.query(lake_dir, "select job_key from incidents")[1]}
    for name in ("incidents", *TABLES):
        jobs = {p.parent.name for p in (lake_dir / name).glob("month=2026-11/job=*/part-0.parquet")}
        assert jobs == {f"job={lake.partition_name(k)}" for k in keys}, name
    assert not list((lake_dir / lake.STAGING).iterdir())


def test_reingesting_a_job_replaces_it(tmp_path, analyses):
    lake.write_job(tmp_path, analyses[0])
    before = lake_contents(tmp_path)
    lake.write_job(tmp_path, analyses[0])
    assert lake_contents(tmp_path) == before
    assert lake.query(tmp_path, "select count(*) from incidents")[1] == [(1,)]


def test_a_job_in_another_month_is_moved_not_doubled(tmp_path, analyses):
    lake.write_job(tmp_path, analyses[0])
    old = tmp_path / "events" / "month=2026-11"
    moved = tmp_path / "events" / "month=2025-01"
    old.rename(moved)  # as if the job's earlier ingest had counted another month
    lake.write_job(tmp_path, analyses[0])
    assert not any(moved.iterdir())
    assert len(lake_rows(tmp_path, "events")) == analyses[0].tables["events"].num_rows


def test_a_job_id_from_the_logs_never_leaves_the_lake(tmp_path, analyses):
    hostile = replace(analyses[0], job_id="../../escape")
    key = lake.write_job(tmp_path / "lake", hostile)
    assert key.startswith("../../escape-")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all((tmp_path / "lake") in p.parents for p in written)
    assert lake.query(tmp_path / "lake", "select job_id from incidents")[1] == [("../../escape",)]
    for name in ("../x", "a/b=c", ".hidden", "", "é x"):
        safe = lake.partition_name(f"{name}-0123456789ab")
        assert "/" not in safe and "=" not in safe and not safe.startswith(".") and safe.endswith("-0123456789ab")


def _stage_only(lake_dir: Path, analysis) -> Path:
    """A job written aside, as a writer killed just before publishing leaves it."""
    lake.claim(lake_dir)
    stage = lake_dir / lake.STAGING / "killed"
    stage.mkdir()
    lake._stage(stage, analysis)
    return stage


def test_a_writer_killed_before_publishing_leaves_no_job(tmp_path, analyses):
    lake.write_job(tmp_path, analyses[1])
    stage = _stage_only(tmp_path, analyses[0])
    (stage / lake.PUBLISH).unlink()  # killed while staging: its files are not all there
    assert [r[0] for r in lake.query(tmp_path, "select job_id from incidents")[1]] == ["39"]
    assert lake.query(tmp_path, "select count(distinct job_key) from events")[1] == [(1,)]
    lake.recover(tmp_path)
    assert not stage.exists()


def test_a_writer_killed_while_publishing_is_finished_by_the_next(tmp_path, analyses):
    lake.write_job(tmp_path, analyses[0])
    whole = lake_contents(tmp_path)
    stage = _stage_only(tmp_path, analyses[0])
    info = json.loads((stage / lake.PUBLISH).read_text())
    # Killed after the old incident went out and two tables moved in.
    lake._remove_job(tmp_path, "incidents", info["job"])
    for name in TABLES[:2]:
        lake._remove_job(tmp_path, name, info["job"])
        lake._staged(stage, name, info).rename(tmp_path / name / f"month={info['month']}" / f"job={info['job']}")
    assert lake.query(tmp_path, "select count(*) from events")[1] == [(0,)]  # no half job in the views
    lake.write_job(tmp_path, analyses[1])  # the next writer finishes it first
    assert not stage.exists()
    after = lake_contents(tmp_path)
    for name, wanted in whole.items():
        job_rows = [r for r in after[name] if info["job_key"] in r]
        assert job_rows == wanted, name


def test_a_killed_ingest_leaves_whole_jobs_only(tmp_path):
    """SIGKILL at some point of a CLI ingest of three jobs: every job the lake shows is whole."""
    lake_dir = tmp_path / "lake"
    proc = subprocess.Popen([sys.executable, "-c", "from correlator.cli import app; app()", "ingest", *map(str, SAMPLES),
                             "--lake", str(lake_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not (lake_dir / "incidents").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lake.recover(lake_dir)
    assert not list((lake_dir / lake.STAGING).iterdir())
    keys = {r[0] for r in lake.query(lake_dir, "select job_key from incidents")[1]}
    for name in TABLES:
        jobs = {p.name for p in (lake_dir / name).glob("month=*/job=*")}
        assert jobs == {f"job={lake.partition_name(k)}" for k in keys}, name


def test_cli_ingest_sql_and_history_over_a_lake(tmp_path):
    lake_dir = tmp_path / "lake"
    result = cli("ingest", SAMPLES[0], SAMPLES[1], "--lake", lake_dir)
    assert result.exit_code == 0, result.output
    assert "rank_stalled" in result.output
    result = cli("sql", "--lake", lake_dir, "select job_id, kind from incidents order by job_id", "-f", "csv")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["job_id,kind", "39,rank_crashed", "tr-stalled_rank-4,rank_stalled"]
    result = cli("history", "--lake", lake_dir, "-f", "json")
    assert {job["kind"] for job in json.loads(result.output)} == {"rank_crashed", "rank_stalled"}
    result = cli("sql", "--lake", lake_dir, "select host from culprit_hosts_by_month order by host", "-f", "csv")
    assert result.output.splitlines() == ["host", "node2", "vm"]


def test_a_lake_read_by_duckdb_alone(filled):
    """What Spark or Trino see: plain Hive-partitioned Parquet, no correlator code."""
    import duckdb
    lake_dir, db = filled
    found = duckdb.sql(f"select kind, count(*) from read_parquet('{lake_dir}/incidents/*/*/*.parquet', "
                       "hive_partitioning=true) group by kind order by kind").fetchall()
    assert found == sorted(store.query(db, "select kind, count(*) from incidents group by kind")[1])


@pytest.mark.parametrize("args, message", [
    (["ingest", SAMPLES[0], "--lake", "/proc/no-lake"], "cannot write the lake /proc/no-lake"),
    (["ingest", SAMPLES[0], "--lake", ROOT / "samples"], "is not empty and is not a correlator lake"),
    (["ingest", SAMPLES[0], "--lake", ROOT / "README.md"], "is a file, not a directory"),
    (["ingest", SAMPLES[0], "--lake", "/tmp/x", "--db", "/tmp/x.duckdb"], "give --db or --lake, not both"),
    (["ingest", SAMPLES[0], "--address", "auto"], "--address needs --engine ray"),
    (["sql", "--lake", "/tmp/no-such-lake-here", "select 1"], "no lake at /tmp/no-such-lake-here"),
    (["history", "--lake", "/tmp/no-such-lake-here"], "no lake at"),
])
def test_user_errors_are_one_line_and_exit_2(args, message):
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_sql_over_a_lake_refuses_write_and_bad_sql(filled):
    lake_dir, _ = filled
    for args, message in ((["--write", "select 1"], "--write changes a --db file"),
                          (["select * from nowhere"], "nowhere"), ([" ; "], "empty query")):
        result = cli("sql", "--lake", lake_dir, *args)
        assert result.exit_code == 2 and message in result.output, result.output


def test_engine_ray_without_ray_is_one_line(tmp_path):
    """The base install has no Ray: --engine ray says how to get it."""
    code = ("import sys; sys.modules['ray'] = None\n"
            "from correlator.cli import app\n"
            f"app(['analyze', {str(SAMPLES[0])!r}, '--engine', 'ray'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --engine ray needs Ray: pip install 'correlator[ray]'"


def test_an_empty_lake_has_every_table_and_view(tmp_path):
    lake.claim(tmp_path)
    for name in ("incidents", *TABLES, *VIEWS):
        assert lake.query(tmp_path, f"select count(*) from {name}")[1] == [(0,)], name
