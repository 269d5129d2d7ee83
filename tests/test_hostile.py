"""Hostile input: a job directory full of traps around one real fault.

The analysis must not crash, hang or write anywhere; every file it cannot use is listed with a
reason; no escape sequence from log text reaches the terminal; and the stalled rank is still found.
The real CLI runs in a subprocess, as a user would run it.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from correlator.synth import JobSpec, generate_job
from correlator.parsers.reader import iter_batches

CLI = Path(sys.executable).with_name("correlator")
TINY_FILES = 10_000
HUGE_LINE_BYTES = 50 << 20
# Escape sequences a log line may carry: colour, clear screen, window title, hyperlink.
COLOUR = "\x1b[1;31m{}\x1b[0m"
TERMINAL_ATTACK = "\x1b[2J\x1b[H\x1b]0;owned-title\x07\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
# Markers of log-borne sequences; rich's own styling (CSI ...m) is allowed under a TTY.
LOG_BORNE = ("\x1b]", "\x1b[2J", "\x1b[H", "owned-title", "evil.example")


class _RunsCommand:
    """A "Flight Recorder dump" whose unpickling would run a command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _hostile_real_log(log: Path) -> None:
    """The real job's log as a hostile collector would store it: CRLF endings, coloured levels,
    terminal attacks in the error lines, invalid UTF-8 and NUL lines in between."""
    out = bytearray()
    for i, line in enumerate(log.read_text().splitlines()):
        line = line.replace(" INFO ", " " + COLOUR.format("INFO") + " ")
        if "Watchdog caught collective operation timeout" in line:
            line += TERMINAL_ATTACK
        out += line.encode() + b"\r\n"
        if i % 17 == 0:
            out += b"\xff\xfe garbage \xc3\x28 \xed\xa0\x80 \x00\x00 nul inside\r\n"
    log.write_bytes(bytes(out))


def _evil_tar(path: Path) -> None:
    with tarfile.open(path, "w") as tar:
        for name in ("../x", "/etc/x"):
            data = b"written outside the job directory?\n"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("passwd-link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)


def build_real_job(root: Path) -> tuple[Path, dict]:
    """A real stalled-rank job whose logs carry terminal attacks: (log directory, truth)."""
    truth = generate_job(root / "job", JobSpec(fault="stall", coll_lines=True, launcher="srun", nranks=4,
                                               ranks_per_host=2, steps=6, seed=3))
    logs = root / "job" / "logs"
    for log in logs.iterdir():
        _hostile_real_log(log)
    (logs / "escapes.log").write_text(f"plain {COLOUR.format('red')} {TERMINAL_ATTACK} tail\n" * 20)
    (logs / f"name-{TERMINAL_ATTACK[:8]}.log").write_text("a file whose name clears the screen\n")
    return logs, truth


def build_hostile_job(root: Path) -> tuple[Path, dict, Path]:
    """(log directory, truth of the real fault, file whose existence means a pickle ran code)."""
    logs, truth = build_real_job(root)
    pwned = root / "pwned"
    (logs / "random.bin").write_bytes(os.urandom(1 << 20))
    with open(logs / "huge-line.log", "wb") as f:
        f.write(b"NCCL INFO " * (HUGE_LINE_BYTES // 10))
    whole = gzip.compress(b"".join(b"node9:1:1 [0] NCCL INFO line %d\n" % i for i in range(20_000)))
    (logs / "truncated.log.gz").write_bytes(whole[: len(whole) // 2])
    (logs / "mixed-utf8.log").write_bytes(
        b"node1:1975428:1975428 [0] NCCL INFO Using network IB\n\xc3\x28\xa0\xa1 bad\n"
        b"\xf0\x28\x8c\xbc NCCL INFO \xff half\n" * 100)
    (logs / "nul.log").write_bytes(b"\x00" * 10 + b"some text\x00with NUL\n" * 50)
    (logs / "crlf.log").write_bytes(b"2026-11-29 21:22:13,484 INFO [rank 0] crlf line\r\n" * 50)
    with open(os.path.join(os.fsencode(logs), b"latin1-\xe9\xff.log"), "wb") as f:
        f.write(b"a file whose name is not UTF-8\n")
    os.symlink("loop-b.log", logs / "loop-a.log")
    os.symlink("loop-a.log", logs / "loop-b.log")
    os.symlink(".", logs / "self-dir")
    os.symlink("/etc/passwd", logs / "outside.log")
    os.mkfifo(logs / "fifo.log")
    (logs / "rank9.log").mkdir()
    _evil_tar(logs / "evil.tar")
    tiny = logs / "tiny"
    tiny.mkdir()
    for i in range(TINY_FILES):
        (tiny / f"t{i:05d}.log").write_text(f"tiny {i}\n")
    (logs / "empty.log").touch()
    (logs / "nccl_trace_rank_0").write_bytes(pickle.dumps(_RunsCommand(pwned), protocol=4))
    return logs, truth, pwned


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (links not followed): what analysing must leave untouched."""
    entries = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            entries[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return entries


def _analyze(logs: Path, fmt: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "analyze", str(logs), "--format", fmt], capture_output=True,
                          timeout=300, **kwargs)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    logs, truth, pwned = build_hostile_job(root)
    before = _snapshot(root)
    json_run = _analyze(logs, "json")
    terminal_run = _analyze(logs, "terminal")
    return dict(root=root, logs=logs, truth=truth, pwned=pwned, before=before,
                json_run=json_run, terminal_run=terminal_run)


def test_hostile_job_still_finds_the_stalled_rank(hostile):
    run = hostile["json_run"]
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in run.stderr
    report = json.loads(run.stdout)
    assert report["verdict"]["kind"] == hostile["truth"]["kind"] == "rank_stalled"
    assert report["verdict"]["culprit_ranks"] == hostile["truth"]["culprit_ranks"]


def test_every_unusable_file_is_listed_with_a_reason(hostile):
    report = json.loads(hostile["json_run"].stdout)
    reasons = {s["path"]: s["reason"] for s in report["job"]["files_skipped"]}
    assert all(reasons.values())
    expected = {
        "random.bin": "binary", "loop-a.log": "symbolic link", "loop-b.log": "symbolic link",
        "self-dir": "symbolic link", "outside.log": "symbolic link", "fifo.log": "not a regular file",
        "evil.tar!passwd-link": "link", "truncated.log.gz": "truncated", "huge-line.log": "cut",
        "nccl_trace_rank_0": "refused: pickle references",
    }
    for path, reason in expected.items():
        assert reason in reasons.get(path, ""), (path, reasons.get(path))


def test_malicious_pickle_runs_nothing_and_nothing_is_written(hostile):
    root = hostile["root"]
    assert not hostile["pwned"].exists()
    assert _snapshot(root) == hostile["before"]
    assert not (root / "job" / "x").exists() and not (root / "x").exists()
    assert not Path("/etc/x").exists()


def test_no_log_borne_escape_reaches_the_terminal(hostile):
    run = hostile["terminal_run"]
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-2000:]
    out = run.stdout.decode()
    assert "rank_stalled" in out or "stalled" in out.lower()
    assert "\x1b" not in out   # stdout is not a TTY: no styling either
    assert b"\x1b" not in run.stderr and b"Traceback" not in run.stderr


def test_no_log_borne_escape_under_a_tty(tmp_path):
    """Under a TTY rich styles the report itself; only sequences from the logs are forbidden.
    The real job with its attacks is enough here: the other traps are covered above."""
    import pty
    logs, _ = build_real_job(tmp_path)
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([str(CLI), "analyze", str(logs), "--format", "terminal", "--quiet"],
                            stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    with ThreadPoolExecutor(1) as pool:   # drain while it writes: a full pty would block the child
        out = pool.submit(_drain, primary)
        stderr = proc.communicate(timeout=300)[1]
        out = out.result()
    os.close(primary)
    run = subprocess.CompletedProcess(proc.args, proc.returncode, None, stderr)
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-2000:]
    assert "stalled" in out.lower()
    for marker in LOG_BORNE:
        assert marker not in out, marker


def _drain(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:   # EIO: the other end is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _make_only_binary(tmp: Path) -> Path:
    (tmp / "core.bin").write_bytes(os.urandom(4096))
    return tmp


@pytest.mark.parametrize("make_path, says", [
    (lambda tmp: tmp / "does-not-exist", "no such file or directory"),
    (lambda tmp: (tmp / "empty.log", (tmp / "empty.log").write_text(""))[0], "no log lines"),
    (lambda tmp: tmp, "no log files"),
    (_make_only_binary, "core.bin: binary"),
])
def test_unusable_path_is_one_line_exit_2(tmp_path, make_path, says):
    run = _analyze(make_path(tmp_path), "json")
    assert run.returncode == 2
    assert run.stdout == b""
    message = run.stderr.decode()
    assert message.startswith("error: ") and message.count("\n") == 1 and says in message, message


def _tar_of_logs(n: int, compression: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{compression}") as tar:
        for i in range(n):
            data = b"".join(b"2026-11-29 21:22:13,484 INFO [rank %d] line %d\n" % (i, j) for j in range(50))
            info = tarfile.TarInfo(f"logs/rank{i}.log")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_truncated_tar_gz_keeps_the_members_before_the_cut(tmp_path):
    from correlator.discover import discover
    whole = _tar_of_logs(200, "gz")
    (tmp_path / "logs.tar.gz").write_bytes(whole[: len(whole) // 2])
    sources, skipped = discover(tmp_path)
    assert 0 < len(sources) < 200
    assert [s.path for s in skipped] == ["logs.tar.gz"] and "unreadable archive, after" in skipped[0].reason


def test_tar_zst_and_large_members_are_read(tmp_path, monkeypatch):
    import zstandard
    from correlator import discover as discovery
    from correlator.parsers.files import parse_sources
    monkeypatch.setattr(discovery, "SMALL_MEMBER", 1000)   # every member is re-read from the archive
    (tmp_path / "logs.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(_tar_of_logs(3)))
    sources, skipped = discovery.discover(tmp_path)
    assert not skipped and [s.path for s in sources] == [f"logs.tar.zst!logs/rank{i}.log" for i in range(3)]
    results = parse_sources(sources)
    assert [r.stats.lines for r in results] == [50, 50, 50]
    assert [s.hints.get("rank") for s in sources] == [0, 1, 2]


def test_tree_deeper_than_the_recursion_limit(tmp_path):
    """A lowered limit stands in for a tree deeper than the real one: pytest's own cleanup of
    tmp_path recurses too, so the tree itself stays shallow enough for it."""
    from correlator.discover import discover
    deep = tmp_path
    for _ in range(300):
        deep = deep / "d"
        deep.mkdir()
    (deep / "rank0.log").write_text("the only log\n")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        sources, skipped = discover(tmp_path)
    finally:
        sys.setrecursionlimit(limit)
    assert not skipped and len(sources) == 1 and sources[0].path.endswith("/d/rank0.log")


def test_a_failing_engine_pass_is_reported_on_its_files_not_raised(tmp_path, monkeypatch):
    """Outside the tests (CORRELATOR_STRICT unset) an exception in an engine pass, the last one
    included, becomes a read error of every file the pass held; their lines are still counted."""
    import correlator.parsers.files
    from correlator.discover import discover
    monkeypatch.delenv("CORRELATOR_STRICT")
    monkeypatch.setattr(correlator.parsers.files, "_parse_lines", lambda *a: 1 / 0)
    for i in range(2):
        (tmp_path / f"rank{i}.log").write_text("a line\nanother\n")
    results = correlator.parsers.files.parse_sources(discover(tmp_path)[0])
    assert [r.stats.error for r in results] == ["parse error in a pass over its lines: ZeroDivisionError: division by zero"] * 2
    assert [r.stats.lines for r in results] == [2, 2]


def _table_counts(con) -> dict[str, int]:
    return {name: con.execute(f"select count(*) from {name}").fetchone()[0]
            for name in ("events", "collectives", "progress", "files")}


def test_one_huge_file_hands_its_rows_over_while_it_is_read(tmp_path, monkeypatch):
    """A group of one big file (an `srun -l` output) no longer holds every row to its end: they
    go to DuckDB every HAND_OVER_ROWS, and the tables are the same."""
    import correlator.pipeline as pipeline
    import correlator.parsers.files
    generate_job(tmp_path, JobSpec(nranks=4, coll_lines=True, launcher="srun", steps=100))
    monkeypatch.setattr(correlator.parsers.files, "iter_batches", partial(iter_batches, batch_bytes=4000))
    monkeypatch.setattr(correlator.parsers.files, "GROUP_LINES", 200)
    expected = _table_counts(pipeline.parse_job(tmp_path / "logs").con)
    monkeypatch.setattr(correlator.parsers.files, "HAND_OVER_ROWS", 300)
    handed = []
    insert = pipeline._insert_tables
    monkeypatch.setattr(pipeline, "_insert_tables", lambda con, parts: (handed.append("files" not in parts), insert(con, parts)))
    parts = pipeline.parse_job(tmp_path / "logs")
    assert sum(handed) >= 2 and _table_counts(parts.con) == expected


def test_a_failed_insert_stops_the_workers_instead_of_hanging(tmp_path, monkeypatch):
    """The workers wait on a short queue of rows; when the main thread fails, they stop."""
    import correlator.pipeline as pipeline
    import correlator.parsers.files
    generate_job(tmp_path, JobSpec(nranks=4, coll_lines=True, launcher="srun", steps=100))
    monkeypatch.setattr(correlator.parsers.files, "iter_batches", partial(iter_batches, batch_bytes=4000))
    monkeypatch.setattr(correlator.parsers.files, "GROUP_LINES", 100)
    monkeypatch.setattr(correlator.parsers.files, "HAND_OVER_ROWS", 100)

    def fail(con, parts):
        raise RuntimeError("disk full")
    monkeypatch.setattr(pipeline, "_insert_tables", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        pipeline.parse_job(tmp_path / "logs")
