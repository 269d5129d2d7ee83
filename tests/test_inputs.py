"""A job as users have it: a directory, one or more files, an archive, or a paste on stdin."""
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from correlator.cli import app
from correlator.pipeline import analyze

LOGS = Path(__file__).parent.parent / "samples" / "tr-stalled_rank-4" / "logs"
RANK_FILES = sorted(LOGS.glob("torchrun/*/attempt_0/*/stderr.log"))
CONSOLE = LOGS / "console.log"
CLI = Path(sys.executable).parent / "correlator"
PASTE = (
    "[rank5]:[E1203 04:11:52.118823411 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran "
    "for 600091 milliseconds before timing out.\n"
    "[rank5]:[E1203 04:11:52.119004823 ProcessGroupNCCL.cpp:2170] [PG ID 0 PG GUID 0(default_pg) Rank 5] Timeout "
    "at NCCL work: 8812, last enqueued NCCL work: 8812, last completed NCCL work: 8811.\n"
)


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_one_console_file_is_a_job():
    report = analyze(CONSOLE).report
    assert report["job"]["files"] == 1 and report["job"]["log_dir"] == str(CONSOLE)
    assert report["verdict"]["kind"] != "healthy"


def test_several_files_are_one_job_and_keep_apart_same_names():
    report = analyze([*RANK_FILES]).report
    files = {f for f in (e["file"] for e in report["timeline"])}
    assert len(RANK_FILES) == 4 and len(files) >= 2, files
    assert all("/" in f for f in files), "files with one name are shown by the path they were given"


def test_stdin_is_a_job():
    run = subprocess.run([str(CLI), "analyze", "-", "-f", "json"], input=PASTE.encode(), capture_output=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["job"]["log_dir"] == "-" and report["job"]["id"] == "stdin"
    assert report["job"]["lines"] == 2


def test_a_paste_never_invents_ranks(tmp_path):
    paste = tmp_path / "paste.log"
    paste.write_text(PASTE)
    report = analyze(paste).report
    assert report["job"]["ranks_seen"] == [5] and report["job"]["world_size"] is None


@pytest.mark.parametrize("gutter", ["{n}: {line}", "{n:6d}\t{line}", "{n:4d} | {line}"])
def test_a_paste_copied_with_its_line_numbers_invents_no_ranks(tmp_path, gutter):
    """A gutter (`12: ...`, `cat -n`) counts the lines: not srun's label, and stripped off."""
    lines = CONSOLE.read_text().splitlines()[:60]
    numbered = tmp_path / "numbered.log"
    numbered.write_text("\n".join(gutter.format(n=n, line=line) for n, line in enumerate(lines, 1)) + "\n")
    plain = tmp_path / "plain.log"
    plain.write_text("\n".join(lines) + "\n")
    assert analyze(numbered).report["job"]["ranks_seen"] == analyze(plain).report["job"]["ranks_seen"]


def test_a_paste_of_errors_is_never_healthy(tmp_path):
    paste = tmp_path / "paste.log"
    paste.write_text(PASTE)
    verdict = analyze(paste).report["verdict"]
    assert verdict["kind"] != "healthy"


def test_no_errors_and_no_sign_of_a_good_end_is_unknown(tmp_path):
    """A log that stops without an error is not healthy: it may have been collected mid-hang."""
    log = tmp_path / "rank0.log"
    log.write_text("".join(f"2026-11-29 22:05:4{i},170 INFO [rank 0] step {i}\n" for i in range(1, 6)))
    verdict = analyze(log).report["verdict"]
    assert verdict["kind"] == "unknown" and verdict["missing_facts"]


def test_archive_given_as_the_job(tmp_path):
    archive = tmp_path / "job.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(LOGS, arcname="logs")
    report = analyze(archive).report
    assert report["verdict"]["kind"] == "rank_stalled" and report["verdict"]["culprit_ranks"] == [2]


def test_links_are_followed_inside_the_tree_and_not_out_of_it(tmp_path):
    """Kubernetes' /var/log/containers holds links; a link out of the tree is named, never read."""
    job = tmp_path / "job"
    (job / "pods").mkdir(parents=True)
    (job / "pods" / "real.log").write_text(PASTE)
    os.symlink("pods/real.log", job / "linked.log")
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    os.symlink(secret, job / "outside.log")
    report = analyze(job).report
    reasons = {s["path"]: s["reason"] for s in report["job"]["files_skipped"]}
    assert "outside the given directory" in reasons["outside.log"]
    assert "linked.log" not in reasons and report["job"]["files"] == 2
    assert "hunter2" not in json.dumps(report)


def test_parse_of_one_file_reads_only_that_file(tmp_path):
    (tmp_path / "other.log").write_text("noise\n" * 50)
    (tmp_path / "paste.log").write_text(PASTE)
    result = CliRunner().invoke(app, ["parse", str(tmp_path / "paste.log"), "--table", "files", "--format", "json"])
    rows = [json.loads(l) for l in result.stdout.splitlines()]
    assert [r["path"] for r in rows] == ["paste.log"]


def test_a_missing_path_among_several_is_one_line_exit_2(tmp_path):
    result = CliRunner().invoke(app, ["analyze", str(CONSOLE), str(tmp_path / "typo.log")])
    assert result.exit_code == 2 and "typo.log: no such file or directory" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_paste_of_several_files_gives_each_section_its_files_rank(tmp_path):
    """`tail -n +1 logs/*.log` pasted as one file: the lines under `==> logs/rank2.log <==` are
    rank 2's; a section whose name states no rank leaves its lines without one."""
    from correlator.pipeline import parse_job
    paste = tmp_path / "paste.txt"
    paste.write_text("==> logs/rank0.log <==\nloading shard 0\n\n==> logs/rank2.log <==\nloading shard 2\n"
                     "\n==> notes.txt <==\nloading shard 9\n")
    parsed = parse_job(paste)
    rows = parsed.con.execute("select line, kind, rank from events order by line").fetchall()
    assert rows == [(1, "file_section", 0), (2, "other", 0), (3, "blank", 0), (4, "file_section", 2),
                    (5, "other", 2), (6, "blank", 2), (7, "file_section", None), (8, "other", None)]
