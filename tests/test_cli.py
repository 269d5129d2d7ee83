"""Every command of the README, end to end through the CLI, on a bundled real sample."""
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from correlator.cli import app

SAMPLE = str(Path(__file__).parent.parent / "samples" / "tr-stalled_rank-4" / "logs")
runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_analyze_json_follows_the_contract():
    result = run("analyze", SAMPLE, "--format", "json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["schema_version"] == 1
    assert report["verdict"]["kind"] == "rank_stalled" and report["verdict"]["culprit_ranks"] == [2]
    assert {"job", "verdict", "first_stalled", "divergence", "collateral", "timeline", "evidence", "clock",
            "remediation"} <= set(report)
    assert all(e["file"] and e["line"] for e in report["evidence"])


def test_analyze_full_types_every_line(tmp_path):
    report = json.loads(run("analyze", SAMPLE, "--format", "json", "--full").stdout)
    assert report["verdict"]["kind"] == "rank_stalled" and report["job"]["lines_skimmed"] == 0


@pytest.mark.parametrize("fmt,marker", [("terminal", "rank_stalled"), ("markdown", "## Verdict"), ("html", "<svg")])
def test_analyze_other_formats(fmt, marker, tmp_path):
    out = tmp_path / f"report.{fmt}"
    assert run("analyze", SAMPLE, "--format", fmt, "--out", out).exit_code == 0
    assert marker in out.read_text()


def test_input_errors_exit_2_with_one_line(tmp_path):
    for path in (tmp_path / "missing", tmp_path):
        result = run("analyze", path)
        assert result.exit_code == 2
        assert result.output.strip().startswith("error:") and len(result.output.strip().splitlines()) == 1


def test_timeline_filters_by_rank():
    result = run("timeline", SAMPLE, "--rank", 2)
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and lines and all(" rank 2 " in line for line in lines)


def test_parse_and_formats(tmp_path):
    rows = [json.loads(l) for l in run("parse", SAMPLE, "--table", "progress", "--format", "json").stdout.splitlines()]
    assert {r["rank"] for r in rows} == {0, 1, 2, 3}
    out = tmp_path / "events.parquet"
    assert run("parse", SAMPLE, "--format", "parquet", "--out", out).exit_code == 0 and out.stat().st_size > 0
    assert "nccl_coll" in run("formats").stdout
    assert run("parse", SAMPLE, "--table", "nope").exit_code == 2


def test_history_commands_end_to_end(tmp_path):
    db = tmp_path / "h.duckdb"
    assert run("ingest", SAMPLE, "--db", db).exit_code == 0
    assert run("ingest", SAMPLE, "--db", db).exit_code == 0          # replaces, no duplicate
    csv = run("sql", "select job_id, kind from incidents", "--db", db, "--format", "csv").stdout
    assert csv.splitlines() == ["job_id,kind", "tr-stalled_rank-4,rank_stalled"]
    assert "tr-stalled_rank-4" in run("history", "--db", db).stdout
    stored = json.loads(run("report", "tr-stalled_rank-4", "--db", db, "--format", "json").stdout)
    assert stored["verdict"]["culprit_ranks"] == [2]
    assert run("export", "--parquet", tmp_path / "pq", "--db", db).exit_code == 0
    assert list((tmp_path / "pq" / "incidents").rglob("*.parquet"))


def test_the_store_keeps_every_coll_line_typed(tmp_path, monkeypatch):
    """`analyze` counts the COLL lines outside its window; `analyze --db` and `ingest` store them
    all typed (the window made tiny here: a generated job's communicators have ~100 lines)."""
    import correlator.cli
    from correlator.synth import JobSpec, generate_job
    monkeypatch.setattr(correlator.cli, "WINDOW", 4)
    generate_job(tmp_path / "job", JobSpec(nranks=4, coll_lines=True, fault="stall", seed=1))
    logs, db = tmp_path / "job" / "logs", tmp_path / "h.duckdb"
    assert json.loads(run("analyze", logs, "--format", "json").stdout)["job"]["lines_skimmed"] > 0
    for command in (["analyze", logs, "--format", "json", "--db", db], ["ingest", logs, "--db", db]):
        assert run(*command).exit_code == 0
        skimmed = run("sql", "select sum(lines_skimmed) from files", "--db", db, "--format", "csv").stdout
        assert skimmed.splitlines()[1] == "0"


def test_version():
    assert run("--version").stdout.startswith("correlator ")


def test_the_console_script_exits_with_the_commands_status_and_all_its_output():
    """`correlator` skips the interpreter's teardown after analyze (correlator.console): the report
    is whole, and a user error still exits 2 with its one line."""
    import subprocess
    import sys
    cli = Path(sys.executable).with_name("correlator")
    done = subprocess.run([str(cli), "analyze", SAMPLE, "-f", "json"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"]["kind"]
    missing = subprocess.run([str(cli), "analyze", "/nonexistent/job"], capture_output=True, text=True)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr


def test_the_command_leaves_pandas_and_numpy_unloaded_and_its_verdict_unchanged():
    """The console script hides pandas and numpy from pyarrow (correlator.unused_modules: their
    imports were a fifth of a paste's time); the report is the one the library gives."""
    import subprocess
    import sys
    probe = ("import sys, json; sys.argv = ['correlator', 'analyze', sys.argv[1], '-f', 'json']\n"
             "from correlator.console import run\n"
             "run()\n"
             "print(sorted({'pandas', 'numpy'} & set(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, SAMPLE], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"
    library = CliRunner().invoke(app, ["analyze", SAMPLE, "-f", "json"])
    assert json.loads(done.stdout)["verdict"] == json.loads(library.stdout)["verdict"]
