"""The history store on real DuckDB files in tmp_path."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

from correlator import store
from correlator.cli_store import register
from correlator.tables import SCHEMAS, TABLES, empty

REPO = Path(__file__).resolve().parents[1]


@dataclass
class FakeAnalysis:
    job_dir: Path
    job_id: str
    tables: dict[str, pa.Table]
    report: dict


def _events(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMAS["events"])


def make_analysis(job_dir: Path, job_id: str, *, kind="rank_crashed", hosts=("node1",), ranks=(2,),
                  traceback="RuntimeError: CUDA error: out of memory", divergence_op=None,
                  when=datetime(2026, 11, 29, 21, 9, 1, tzinfo=timezone.utc)) -> FakeAnalysis:
    job_dir.mkdir(parents=True, exist_ok=True)
    tables = {name: empty(name) for name in TABLES}
    tables["files"] = pa.Table.from_pylist(
        [{"path": "logs/2/stderr.log", "kinds": ["python"], "bytes": 1200, "lines": 40, "lines_unparsed": 0,
          "host": hosts[0] if hosts else None, "rank": 2, "local_rank": 2, "mtime": when}],
        schema=SCHEMAS["files"],
    )
    tables["events"] = _events([
        {"file": "logs/2/stderr.log", "line": 10, "host": "node1", "rank": 2, "source": "python", "kind": "app",
         "level": "INFO", "ts": when.replace(minute=8), "text": "[rank 2] step 3/10 loss 1.5"},
        {"file": "logs/2/stderr.log", "line": 30, "host": "node1", "rank": 2, "source": "python", "kind": "traceback",
         "level": "ERROR", "ts": when,
         "text": f"Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n{traceback}\n"},
    ])
    divergence = None
    if divergence_op:
        divergence = {"pg": "0", "counter": "pg_seq", "seq": 42,
                      "groups": [{"ranks": [0, 1, 3], "op": divergence_op}, {"ranks": [2], "op": None}]}
    report = {
        "schema_version": 1,
        "job": {"id": job_id, "log_dir": str(job_dir), "world_size": 4, "ranks_seen": [0, 1, 2, 3], "hosts": list(hosts)},
        "verdict": {"kind": kind, "summary": f"{kind} on {','.join(hosts)}", "culprit_ranks": list(ranks),
                    "culprit_hosts": list(hosts), "confidence": "high", "missing_facts": []},
        "first_stalled": {"rank": 2, "host": "node1", "pg": "0", "counter": "pg_seq", "last_seq": 41,
                          "last_op": "ALLREDUCE", "last_seen": "2026-11-29T21:09:01.857Z"},
        "divergence": divergence,
    }
    return FakeAnalysis(job_dir, job_id, tables, report)


def count(db: Path, table: str = "incidents") -> int:
    return store.query(db, f"select count(*) from {table}")[1][0][0]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.duckdb"


def test_default_db_path_prefers_env_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("CORRELATOR_DB", str(tmp_path / "x.duckdb"))
    assert store.default_db_path() == tmp_path / "x.duckdb"
    monkeypatch.delenv("CORRELATOR_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert store.default_db_path() == tmp_path / "data" / "correlator" / "history.duckdb"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store.default_db_path() == tmp_path / "home" / ".local" / "share" / "correlator" / "history.duckdb"


def test_ingest_is_idempotent_per_job_and_log_dir(db, tmp_path):
    first = store.ingest(make_analysis(tmp_path / "a", "100"), db)
    store.ingest(make_analysis(tmp_path / "b", "200", kind="rank_stalled"), db)
    assert count(db) == 2
    assert count(db, "events") == 4

    again = store.ingest(make_analysis(tmp_path / "a", "100", kind="rank_stalled"), db)
    assert again == first
    assert count(db) == 2
    assert count(db, "events") == 4
    assert store.query(db, f"select kind from incidents where job_key = '{first}'")[1] == [("rank_stalled",)]


def test_same_job_id_in_two_dirs_is_kept_apart(db, tmp_path):
    key_a = store.ingest(make_analysis(tmp_path / "a", "300"), db)
    key_b = store.ingest(make_analysis(tmp_path / "b", "300"), db)
    assert key_a != key_b and key_a.startswith("300-") and key_b.startswith("300-")
    assert count(db) == 2
    with pytest.raises(store.StoreError, match="names 2 log dirs"):
        store.load_report(db, "300")
    assert store.load_report(db, key_b)["job"]["log_dir"] == str(tmp_path / "b")


def test_incident_row_holds_the_verdict(db, tmp_path):
    key = store.ingest(make_analysis(tmp_path / "a", "400", hosts=("node7",), ranks=(5,), divergence_op="ALLREDUCE"), db)
    columns, rows = store.query(db, f"select * from incidents where job_key = '{key}'")
    row = dict(zip(columns, rows[0]))
    assert row["job_id"] == "400"
    assert row["log_dir"] == str((tmp_path / "a").resolve())
    assert row["culprit_ranks"] == [5] and row["culprit_hosts"] == ["node7"]
    assert (row["world_size"], row["confidence"]) == (4, "high")
    assert (row["first_stalled_rank"], row["first_stalled_pg"], row["first_stalled_seq"]) == (2, "0", 41)
    assert (row["divergence_pg"], row["divergence_seq"], row["divergence_op"]) == ("0", 42, "ALLREDUCE")
    assert row["last_event_at"] == datetime(2026, 11, 29, 21, 9, 1, tzinfo=timezone.utc)
    assert len(row["content_hash"]) == 64
    assert json.loads(row["report_json"])["verdict"]["culprit_hosts"] == ["node7"]
    assert store.history(db)[0]["job_key"] == key
    assert store.load_report(db, "400")["verdict"]["culprit_ranks"] == [5]
    with pytest.raises(store.JobNotFound):
        store.load_report(db, "nope")


def test_failed_ingest_rolls_back_and_keeps_the_previous_version(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "a", "500"), db)
    broken = make_analysis(tmp_path / "a", "500", kind="healthy")
    broken.tables["progress"] = pa.table({"step": pa.array(["not a number"])})  # fails mid-transaction
    with pytest.raises(pa.ArrowInvalid):
        store.ingest(broken, db)
    assert store.query(db, "select kind from incidents")[1] == [("rank_crashed",)]
    assert count(db, "events") == 2


def test_store_tables_match_the_arrow_schemas(db, tmp_path):
    """Guards against editing tables.py without a migration."""
    duck_type = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE",
                 pa.timestamp("us", tz="UTC"): "TIMESTAMP WITH TIME ZONE",
                 pa.list_(pa.string()): "VARCHAR[]", pa.bool_(): "BOOLEAN", pa.list_(pa.int64()): "BIGINT[]"}
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    for name in TABLES:
        _, rows = store.query(db, f"describe {name}")
        assert [(r[0], r[1]) for r in rows] == [("job_key", "VARCHAR")] + [
            (field.name, duck_type[field.type]) for field in SCHEMAS[name]
        ]


def test_tables_and_columns_added_to_tables_py_appear_on_open(db, tmp_path, monkeypatch):
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    monkeypatch.setitem(SCHEMAS, "progress", SCHEMAS["progress"].append(pa.field("loss", pa.float64())))
    monkeypatch.setitem(SCHEMAS, "gpus", pa.schema([("host", pa.string()), ("index", pa.int64())]))
    monkeypatch.setattr(store, "TABLES", (*TABLES, "gpus"))

    assert ("loss", "DOUBLE") in [row[:2] for row in store.query(db, "describe progress")[1]]
    assert count(db, "gpus") == 0 and count(db, "events") == 2
    analysis = make_analysis(tmp_path / "b", "2")
    analysis.tables["gpus"] = pa.table({"host": ["node1"], "index": [0]})
    key = store.ingest(analysis, db)
    assert store.query(db, "select job_key, host, index from gpus")[1] == [(key, "node1", 0)]


def test_read_only_query_refuses_writes(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    with pytest.raises(store.StoreError, match="read-only"):
        store.query(db, "delete from incidents")
    assert count(db) == 1
    store.query(db, "delete from incidents", write=True)
    assert count(db) == 0


def test_bad_sql_and_missing_db_are_one_line_errors(db, tmp_path):
    with pytest.raises(store.StoreError, match="no history database"):
        store.query(db, "select 1")
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    with pytest.raises(store.StoreError) as error:
        store.query(db, "selec 1")
    assert "\n" not in str(error.value) and "syntax error" in str(error.value)


def test_views_answer_the_common_questions(db, tmp_path):
    oom = "torch.OutOfMemoryError: CUDA out of memory"
    store.ingest(make_analysis(tmp_path / "a", "1", hosts=("node1",), traceback=oom), db)
    store.ingest(make_analysis(tmp_path / "b", "2", hosts=("node1",), traceback=oom), db)
    store.ingest(make_analysis(tmp_path / "c", "3", kind="collective_mismatch", hosts=("node2",),
                               divergence_op="ALLREDUCE", traceback="ValueError: x"), db)
    store.ingest(make_analysis(tmp_path / "d", "4", kind="collective_mismatch", hosts=("node3",),
                               divergence_op="ALLREDUCE", traceback="ValueError: y"), db)
    store.ingest(make_analysis(tmp_path / "e", "5", kind="healthy", hosts=(), ranks=(), traceback="ValueError: y"), db)

    _, rows = store.query(db, "select month, host, incidents from culprit_hosts_by_month")
    assert rows == [("2026-11", "node1", 2), ("2026-11", "node2", 1), ("2026-11", "node3", 1)]

    _, rows = store.query(db, "select week, kind, incidents from kinds_by_week")
    monday = datetime(2026, 11, 23).date()
    assert rows == [(monday, "collective_mismatch", 2), (monday, "rank_crashed", 2), (monday, "healthy", 1)]

    _, rows = store.query(db, "select last_line, jobs, job_ids from recurring_tracebacks")
    assert rows == [("ValueError: y", 2, ["4", "5"]), (oom, 2, ["1", "2"]), ("ValueError: x", 1, ["3"])]

    _, rows = store.query(db, "select job_id, similar_job_id, shared_culprit_hosts, shared_divergence_op from similar_jobs order by all")
    assert rows == [("1", "2", ["node1"], None), ("2", "1", ["node1"], None),
                    ("3", "4", [], "ALLREDUCE"), ("4", "3", [], "ALLREDUCE")]


def test_export_parquet_round_trips(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    store.ingest(make_analysis(tmp_path / "b", "2", divergence_op="BROADCAST"), db)
    out = tmp_path / "export"
    counts = store.export_parquet(db, out)
    assert counts["incidents"] == 2 and counts["events"] == 4 and counts["comms"] == 0
    month = "2026-11"  # when the incidents happened (their last log line), not when they were analysed
    assert list((out / "events").iterdir()) == [out / "events" / f"month={month}"]

    for table in ("incidents", "events", "files"):
        columns, stored = store.query(db, f"select * from {table} order by all")
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        exported = con.execute(
            f"select {', '.join(columns)} from read_parquet('{out / table}/**/*.parquet', hive_partitioning=true) order by all"
        ).fetchall()
        partitions = con.execute(
            f"select distinct month from read_parquet('{out / table}/**/*.parquet', hive_partitioning=true)"
        ).fetchall()
        con.close()
        assert exported == stored
        assert partitions == [(month,)]

    store.export_parquet(db, out)  # a previous export is replaced, not appended to
    assert len(list((out / "incidents").rglob("*.parquet"))) == 1
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.txt").write_text("x")
    with pytest.raises(store.StoreError, match="not empty"):
        store.export_parquet(db, tmp_path / "other")


def test_export_partitions_by_the_incidents_month_as_the_views_do(db, tmp_path):
    """An old incident ingested today lands in the month it happened, the month culprit_hosts_by_month
    counts it in; an incident whose logs carry no time, in the month it was analysed."""
    store.ingest(make_analysis(tmp_path / "old", "old", when=datetime(2025, 3, 31, 23, 59, tzinfo=timezone.utc)), db)
    untimed = make_analysis(tmp_path / "untimed", "untimed")
    untimed.tables["events"] = untimed.tables["events"].set_column(
        untimed.tables["events"].schema.get_field_index("ts"), "ts", pa.nulls(2, pa.timestamp("us", tz="UTC")))
    store.ingest(untimed, db)
    out = tmp_path / "export"
    store.export_parquet(db, out)
    con = duckdb.connect()
    exported = dict(con.execute(f"select job_id, month from read_parquet('{out}/incidents/**/*.parquet', "
                                "hive_partitioning=true)").fetchall())
    by_view = dict(store.query(db, "select job_ids[1], month from culprit_hosts_by_month")[1])
    assert exported["old"] == "2025-03" == by_view.get("old", "2025-03")
    assert exported["untimed"] == datetime.now(timezone.utc).strftime("%Y-%m")
    assert {p.name for p in (out / "events").iterdir()} == {"month=2025-03", f"month={exported['untimed']}"}


def test_export_writes_empty_tables_too(db, tmp_path):
    """A query over a table that no job filled (desync, comms...) finds its columns and no rows,
    not "no files found"."""
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    out = tmp_path / "export"
    counts = store.export_parquet(db, out)
    con = duckdb.connect()
    for table in ("incidents", *TABLES):
        assert (out / table).is_dir(), table
        rel = con.sql(f"select * from read_parquet('{out / table}/**/*.parquet', hive_partitioning=true)")
        assert len(rel.fetchall()) == counts[table], table
        assert "job_key" in rel.columns and "month" in rel.columns, (table, rel.columns)
    assert counts["desync"] == 0
    stored_columns, _ = store.query(db, "select * from desync")
    exported = con.sql(f"select * from read_parquet('{out}/desync/**/*.parquet', hive_partitioning=true)").columns
    assert exported == [*stored_columns, "month"]
    assert con.execute(f"select count(*) from read_parquet('{out}/desync/**/*.parquet', hive_partitioning=true) "
                       "where month is null").fetchone() == (0,)


def test_recurring_tracebacks_skip_launcher_boilerplate(db, tmp_path):
    """torchrun's ChildFailedError and an agent's SignalException follow every failed job: grouped,
    they would top the view and hide the errors that recur; a traceback cut after a frame neither."""
    launcher = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "ChildFailedError: ",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 41022 got signal: 15",
        '  File "/usr/lib/python3/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
    ]
    for index, text in enumerate(launcher * 2):
        store.ingest(make_analysis(tmp_path / f"j{index}", f"j{index}", traceback=text), db)
    store.ingest(make_analysis(tmp_path / "real", "real", traceback="RuntimeError: CUDA error: an illegal memory access"), db)
    _, rows = store.query(db, "select last_line, jobs from recurring_tracebacks")
    assert rows == [("RuntimeError: CUDA error: an illegal memory access", 1)]


def test_v1_database_is_migrated_with_its_data(db):
    v1_sql = (store.MIGRATIONS_DIR / "001_initial.sql").read_text()
    report = {"schema_version": 1, "verdict": {"kind": "collective_mismatch"},
              "divergence": {"pg": "0", "seq": 7, "groups": [{"ranks": [1], "op": None}, {"ranks": [0, 2], "op": "ALLGATHER"}]}}
    con = duckdb.connect(str(db))
    con.execute(v1_sql)
    con.execute("insert into meta values ('schema_version', '1')")
    con.execute("""insert into incidents (job_key, job_id, log_dir, analysed_at, kind, culprit_hosts, report_json)
                   values ('7-abc', '7', '/logs/7', '2026-10-02 10:00:00+00', 'collective_mismatch', ['node4'], ?)""",
                [json.dumps(report)])
    con.execute("insert into events (job_key, kind, ts, text) values ('7-abc', 'app', '2026-09-30 23:00:00+00', 'hi')")
    con.close()

    columns, rows = store.query(db, "select job_id, kind, culprit_hosts, divergence_op, last_event_at from incidents")
    assert rows == [("7", "collective_mismatch", ["node4"], "ALLGATHER", datetime(2026, 9, 30, 23, tzinfo=timezone.utc))]
    assert store.query(db, "select value from meta where key = 'schema_version'")[1] == [(str(store.SCHEMA_VERSION),)]
    assert store.query(db, "select month, host from culprit_hosts_by_month")[1] == [("2026-09", "node4")]
    assert count(db, "events") == 1


def test_newer_database_is_refused(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    store.query(db, "update meta set value = '999' where key = 'schema_version'", write=True)
    with pytest.raises(store.StoreError, match="newer"):
        store.query(db, "select 1")


# --- several processes ------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    from pathlib import Path
    from correlator import store
    from test_store import make_analysis
    job_dir, job_id, db, timeout = sys.argv[1:5]
    try:
        print(store.ingest(make_analysis(Path(job_dir), job_id), Path(db), timeout=float(timeout)))
    except store.StoreBusy as error:
        print(error, file=sys.stderr)
        sys.exit(3)
""")


def _spawn_ingest(tmp_path: Path, db: Path, job_id: str, timeout: float) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), tests=str(REPO / "tests")))
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / job_id), job_id, str(db), str(timeout)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_concurrent_ingests_both_land(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "first", "0"), db)
    children = [_spawn_ingest(tmp_path, db, job_id, timeout=60) for job_id in ("1", "2", "3")]
    results = [child.communicate() + (child.returncode,) for child in children]
    assert [code for _, _, code in results] == [0, 0, 0], results
    assert count(db) == 4


def test_ingest_into_a_locked_db_fails_cleanly_then_db_still_works(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "first", "0"), db)
    holder = duckdb.connect(str(db))  # this process now holds the write lock
    try:
        child = _spawn_ingest(tmp_path, db, "1", timeout=0.3)
        _, stderr = child.communicate()
    finally:
        holder.close()
    assert child.returncode == 3
    assert stderr.count("\n") == 1 and "is busy" in stderr and f"PID {os.getpid()}" in stderr
    assert count(db) == 1


def test_a_killed_writer_leaves_the_last_commit_intact(db, tmp_path):
    store.ingest(make_analysis(tmp_path / "a", "1"), db)
    killer = (f"import duckdb, os, signal; con = duckdb.connect({str(db)!r}); con.execute('begin');"
              "con.execute('delete from incidents'); con.execute('delete from events');"
              "os.kill(os.getpid(), signal.SIGKILL)")
    assert subprocess.run([sys.executable, "-c", killer]).returncode == -signal.SIGKILL
    assert count(db) == 1 and count(db, "events") == 2


# --- CLI --------------------------------------------------------------------------------------

@pytest.fixture
def cli(tmp_path: Path):
    app = typer.Typer()
    register(app, lambda path: make_analysis(Path(path), Path(path).name))
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, [str(arg) for arg in args])
    return run


def test_cli_ingest_sql_history_report_export(cli, db, tmp_path):
    result = cli("ingest", tmp_path / "job-1", tmp_path / "job-2", "--db", db)
    assert result.exit_code == 0, result.output
    assert count(db) == 2

    result = cli("sql", "select job_id from incidents order by job_id", "--db", db, "--format", "csv")
    assert result.exit_code == 0 and result.output.splitlines() == ["job_id", "job-1", "job-2"]
    result = cli("sql", "select job_id, culprit_ranks from incidents order by job_id", "--db", db, "--format", "json")
    assert json.loads(result.output)[0] == {"job_id": "job-1", "culprit_ranks": [2]}
    assert "job-2" in cli("sql", "select job_id from incidents", "--db", db).output

    assert "job-1" in cli("history", "--db", db).output
    result = cli("report", "job-1", "--db", db, "--format", "json")
    assert result.exit_code == 0 and json.loads(result.output)["verdict"]["kind"] == "rank_crashed"

    result = cli("export", "--parquet", tmp_path / "out", "--db", db)
    assert result.exit_code == 0 and (tmp_path / "out" / "incidents").is_dir()


@pytest.mark.parametrize("args, message", [
    (["sql", "selec 1"], "syntax error"),
    (["sql", "delete from incidents"], "read-only"),
    (["report", "missing-job"], "no job"),
])
def test_cli_errors_exit_2_with_one_line(cli, db, tmp_path, args, message):
    assert cli("ingest", tmp_path / "job-1", "--db", db).exit_code == 0
    result = cli(*args, "--db", db)
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
