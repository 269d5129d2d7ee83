"""The command line as shell users expect it (gh, ripgrep, lnav, sqlite-utils): every user error is
one line on stderr with exit status 2, a batch goes on past a bad input, colour follows
--color / NO_COLOR / TERM=dumb, --out's extension names the format, -f and -o everywhere."""
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from correlator.cli import app

ROOT = Path(__file__).parent.parent
SAMPLE = ROOT / "samples" / "tr-stalled_rank-4" / "logs"
OTHER = ROOT / "samples" / "slurm-oom" / "logs"
CLI = Path(sys.executable).parent / "correlator"
ESC = "\x1b["


def cli(*args, env=None, timeout=180):
    """The installed command, as a shell runs it: stdout and stderr apart, no terminal."""
    full_env = {**os.environ, "CORRELATOR_DB_TIMEOUT": "5", **(env or {})}
    for name, value in (env or {}).items():
        if value is None:
            full_env.pop(name)
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=full_env)


def one_line_error(run) -> str:
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    return lines[0]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "h.duckdb"
    assert cli("ingest", SAMPLE, "--db", path).returncode == 0
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A job as an archive and as one log file, a corrupt archive, a plain file."""
    where = tmp_path_factory.mktemp("inputs")
    with tarfile.open(where / "job.tar.gz", "w:gz") as tar:
        tar.add(SAMPLE, arcname="logs")
    (where / "file.log").write_text((SAMPLE / "console.log").read_text())
    (where / "broken.tar.gz").write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    (where / "a-file").write_text("x")
    return where


# --- item 7: user errors ---------------------------------------------------------------------

def test_ingest_takes_archives_and_files(inputs, tmp_path):
    db = tmp_path / "h.duckdb"
    for given in (inputs / "job.tar.gz", inputs / "file.log"):
        run = cli("ingest", given, "--db", db)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    rows = json.loads(cli("sql", "select job_id from incidents order by job_id", "--db", db, "-f", "json").stdout)
    assert [r["job_id"] for r in rows] == ["file", "job"]


@pytest.mark.parametrize("args, says", [
    (["ingest", "/nonexistent"], "/nonexistent: no such file or directory"),
    (["sql", ""], "empty query"),
    (["sql", "  ;  -- only a comment"], "empty query"),
    (["sql", "selec 1"], "syntax error"),
    (["report", "no-such-job"], "no job 'no-such-job'"),
    (["export", "--parquet", "{inputs}/a-file"], "is a file, not a directory"),
    (["analyze", SAMPLE, "--out", "/nonexistent/dir/r.json"], "cannot write /nonexistent/dir/r.json"),
    (["analyze", SAMPLE, "--out", "{inputs}"], "cannot write"),
    (["analyze", SAMPLE, "--out", "{inputs}/r.pdf"], "cannot tell the format from 'r.pdf'"),
    (["parse", SAMPLE, "--format", "parquet", "--out", "/nonexistent/x.parquet"], "cannot write /nonexistent/x.parquet"),
    (["analyze", SAMPLE, "--format", "pdf"], "'pdf' is not one of"),
    (["analyze"], "Missing argument"),
    (["frobnicate"], "No such command 'frobnicate'"),
    (["timeline", SAMPLE, "--around", "yesterday"], "bad --around value 'yesterday'"),
])
def test_every_user_error_is_one_line_exit_2(args, says, db, inputs):
    args = [str(a).replace("{inputs}", str(inputs)) for a in args]
    needs_db = args[0] in ("sql", "report", "export")
    line = one_line_error(cli(*args, *(["--db", db] if needs_db else [])))
    assert says in line, line


def test_a_batch_goes_on_past_bad_inputs(inputs, tmp_path):
    db = tmp_path / "h.duckdb"
    run = cli("ingest", "/nonexistent", SAMPLE, inputs / "broken.tar.gz", OTHER, "--db", db)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    errors = run.stderr.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("error: ") for e in errors), run.stderr
    assert errors[0] == "error: /nonexistent: no such file or directory"   # the path said once
    assert str(inputs / "broken.tar.gz") in errors[1]
    stored = cli("sql", "select job_id from incidents order by job_id", "--db", db, "-f", "csv").stdout
    assert stored.split() == ["job_id", "39", "tr-stalled_rank-4"]


def test_help_and_a_bare_command_still_print_the_help():
    assert "Usage:" in cli("analyze", "--help").stdout
    run = cli()
    assert "Commands" in run.stdout + run.stderr


# --- item 10: colour ---------------------------------------------------------------------------

def _terminal(*extra, env=None):
    return cli("analyze", SAMPLE, "-f", "terminal", *extra, env=env)


def test_color_always_never_and_the_environment():
    assert ESC in _terminal("--color", "always").stdout
    assert ESC not in _terminal("--color", "never").stdout
    assert ESC not in _terminal().stdout                                  # auto: not a terminal
    assert ESC in _terminal("--color", "always", env={"NO_COLOR": "1"}).stdout  # the flag wins over the variable


def _under_pty(args, env):
    """Run the CLI with stdout on a pseudo-terminal, as a person's shell does; returns what it printed."""
    import pty
    import select
    leader, follower = pty.openpty()
    full_env = {**os.environ, "COLUMNS": "100", **env}
    process = subprocess.Popen([str(CLI), *map(str, args)], stdout=follower, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, env=full_env)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
@pytest.mark.parametrize("env, coloured", [({"TERM": "xterm-256color"}, True), ({"TERM": "xterm", "NO_COLOR": "1"}, False),
                                           ({"TERM": "dumb"}, False)])
def test_a_terminal_gets_colour_unless_no_color_or_dumb(env, coloured):
    shown = _under_pty(["analyze", SAMPLE], {"NO_COLOR": "", **env})
    assert "rank_stalled" in shown                                        # the terminal report, on a TTY
    assert (ESC in shown) is coloured, shown[:300]


@pytest.mark.parametrize("command", [["parse", SAMPLE, "-t", "progress"], ["history"],
                                     ["sql", "select job_id from incidents"], ["report", "tr-stalled_rank-4", "-f", "terminal"]])
def test_every_coloured_command_takes_color(command, db):
    args = [*command, *(["--db", db] if command[0] in ("history", "sql", "report") else [])]
    assert ESC in cli(*args, "--color", "always").stdout
    assert ESC not in cli(*args, "--color", "never").stdout


# --- item 10: --out picks the format, -f / -o everywhere ---------------------------------------

@pytest.mark.parametrize("name, marker", [("r.html", "<!DOCTYPE html>"), ("r.md", "## Verdict"), ("r.json", '"schema_version": 1'),
                                          ("r.txt", "verdict: rank_stalled")])
def test_out_extension_picks_the_format(name, marker, tmp_path, db):
    assert cli("analyze", SAMPLE, "-o", tmp_path / name).returncode == 0
    assert marker in (tmp_path / name).read_text()
    assert ESC not in (tmp_path / name).read_text()
    assert cli("report", "tr-stalled_rank-4", "--db", db, "-o", tmp_path / f"stored-{name}").returncode == 0
    assert marker in (tmp_path / f"stored-{name}").read_text()


def test_history_and_report_take_format_and_out(db, tmp_path):
    jobs = json.loads(cli("history", "--db", db, "-f", "json").stdout)
    assert jobs[0]["job_id"] == "tr-stalled_rank-4" and jobs[0]["kind"] == "rank_stalled"
    assert cli("history", "--db", db, "-o", tmp_path / "h.csv").returncode == 0
    assert (tmp_path / "h.csv").read_text().startswith("job_id,analysed_at,kind,")
    assert cli("report", "tr-stalled_rank-4", "--db", db, "-f", "markdown").stdout.startswith("# correlator report")
    assert cli("sql", "select 1 as one", "--db", db, "-o", tmp_path / "q.json").returncode == 0
    assert json.loads((tmp_path / "q.json").read_text()) == [{"one": 1}]
    assert cli("parse", SAMPLE, "-t", "progress", "-o", tmp_path / "p.parquet").returncode == 0
    assert (tmp_path / "p.parquet").read_bytes()[:4] == b"PAR1"


def test_short_flags_everywhere():
    runner = CliRunner()
    for command in ("analyze", "parse", "sql", "history", "report"):
        shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        assert "-f, --format" in shown and "-o, --out" in shown, command
        if command != "parse":
            assert "--color" in shown, command
    assert "--color" in runner.invoke(app, ["parse", "--help"], env={"COLUMNS": "200"}).output
