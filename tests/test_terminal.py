"""The terminal report as a person reads it: a short timeline around the failure, every cut list
counted ("+N more"), `timeline` filters that match nothing said so, and nothing broken mid-word
at 80 columns (rendered at width 80 for every sample, and once under a real pty)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from correlator.cli import app
from correlator.pipeline import analyze
from correlator.report import render, view

ROOT = Path(__file__).parent.parent
SAMPLES = sorted(p for p in (ROOT / "samples").iterdir() if (p / "logs").is_dir())
STALL = ROOT / "samples" / "tr-stalled_rank-4" / "logs"
CLI = Path(sys.executable).parent / "correlator"
sys.path.insert(0, str(Path(__file__).parent))
from test_report import large_stall_report  # noqa: E402


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return {sample.name: analyze(sample / "logs").report for sample in SAMPLES}


# --- the timeline section ------------------------------------------------------------------------

def test_the_terminal_report_has_a_timeline_around_the_failure(reports):
    output = render(reports["tr-stalled_rank-4"], "terminal", width=120)
    section = output[output.index("\nTimeline\n"):]
    assert "around the failure (rank 2 stopped at 2026-11-29T22:52:51.972Z)" in section
    # the culprit's last line, and what followed: the others' timeouts
    assert "2026-11-29T22:52:51.972Z" in section and "attempt_0/2/stderr.log:4" in section
    assert "gloo_timeout" in section
    assert "earlier events" in section and "later events in this report" in section
    assert "correlator timeline JOB_DIR shows every event" in section


def test_a_run_that_did_not_fail_shows_its_last_events(reports):
    section = view.timeline_section(reports["tr-healthy-4"])
    caption, table = section.tables[0]
    assert caption.startswith("the last ") and len(table.rows) == view.TIMELINE_BEFORE + view.TIMELINE_AFTER
    assert table.rows[-1][0] == reports["tr-healthy-4"]["timeline"][-1]["time"]


def test_every_format_has_the_timeline_section(reports):
    for fmt in ("terminal", "markdown", "html"):
        assert "around the failure" in render(reports["tr-crash_exception-4"], fmt, width=120), fmt


# --- every cut list is counted ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_every_truncated_list_says_how_many_more(fmt):
    report = large_stall_report()
    report["narrative"] = [f"sentence {i}." for i in range(30)]
    output = render(report, fmt, width=160)
    shown = view.build(report)
    for section in shown.sections:
        for _, table in section.tables:
            if table.omitted:
                assert table.more_line in output.replace("\\", ""), (fmt, section.title, table.more_line)
    assert "+10 more" in output                      # narrative: 30 sentences, 20 shown
    assert "+496 earlier events, +492 later events in this report" in output.replace("\\", "")


def test_parse_and_timeline_count_what_limit_cut():
    runner = CliRunner()
    parsed = runner.invoke(app, ["parse", str(STALL), "-t", "events", "-n", "5"], env={"COLUMNS": "200"})
    assert parsed.exit_code == 0 and "more rows (--limit 0 shows all)" in parsed.output
    cut = runner.invoke(app, ["timeline", str(STALL), "-n", "3"])
    assert len(cut.stdout.splitlines()) == 3 and "more events (--limit 0 shows all)" in cut.stderr


# --- timeline filters that match nothing -----------------------------------------------------------

def test_timeline_filters_that_match_nothing_say_so():
    runner = CliRunner()
    result = runner.invoke(app, ["timeline", str(STALL), "--rank", "9"])
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.strip() == "no events of rank 9: ranks with events are 0-3"
    result = runner.invoke(app, ["timeline", str(STALL), "--around", "2026-11-29T22:05:42"])
    assert result.stdout == "" and result.stderr.strip() == (
        "no events within 30 s of 2026-11-29T22:05:42; the timeline spans 2026-11-29T22:52:36.349Z to "
        "2026-11-29T22:53:15.883Z")
    result = runner.invoke(app, ["timeline", str(STALL), "-r", "2", "--around", "2026-11-29T22:53:12", "-w", "1"])
    assert result.stdout == "" and "rank 2's events span 2026-11-29T22:52:44.644Z to 2026-11-29T22:52:51.972Z" in result.stderr


def test_the_timeline_help_example_prints_events():
    from correlator.cli import timeline
    runner = CliRunner()
    shown = " ".join(timeline.__doc__.split())
    example = shown[shown.index("Example: correlator timeline ") + len("Example: correlator timeline "):]
    args = example.split()
    assert args[0] == "samples/tr-stalled_rank-4/logs"
    result = runner.invoke(app, ["timeline", str(ROOT / args[0]), *args[1:]])
    assert result.exit_code == 0 and result.stdout.count(" rank 2 ") >= 3, result.output


# --- 80 columns ----------------------------------------------------------------------------------

def _words(shown: view.View) -> set[str]:
    """Every word the report shows: cells, paragraphs, facts, captions (kinds, times, ranks, paths)."""
    texts = [shown.title, shown.verdict.kind, shown.verdict.summary, *shown.verdict.missing_facts]
    texts += [value for _, value in shown.verdict.facts]
    for section in shown.sections:
        texts += section.paragraphs
        for caption, table in section.tables:
            texts += [caption, *table.columns, table.more_line]
            texts += [cell for row in table.rows for cell in row]
    texts += [r.action for r in shown.remedies] + [r.verify for r in shown.remedies]
    return {word for text in texts for word in text.split()}


def _unbroken(output: str, words: set[str], width: int) -> list[str]:
    lines = output.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    # a word longer than the width (less an indent) cannot fit on a line: the only one folded
    return sorted(w for w in words if len(w) <= width - 6 and not any(w in line for line in lines))


def test_no_word_kind_or_time_breaks_at_80_columns(reports):
    broken = {}
    for name, report in reports.items():
        output = render(report, "terminal", width=80)
        missing = _unbroken(output, _words(view.build(report)), 80)
        if missing:
            broken[name] = missing[:5]
    assert not broken, broken


def test_the_large_report_at_80_columns():
    report = large_stall_report()
    output = render(report, "terminal", width=80)
    assert not _unbroken(output, _words(view.build(report)), 80)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_under_a_real_terminal_of_80_columns():
    import fcntl
    import pty
    import select
    import struct
    import termios
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen([str(CLI), "analyze", str(ROOT / "samples" / "tr-op_order_mismatch-4-fr" / "logs"),
                                "--color", "never"], stdout=follower, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, env={**env, "TERM": "xterm"})
    os.close(follower)
    chunks = []
    while select.select([leader], [], [], 120)[0]:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=60)
    os.close(leader)
    output = b"".join(chunks).decode().replace("\r\n", "\n")
    assert "verdict: missing_collective" in output
    for word in ("peer_connection_lost", "torchelastic_closing_worker", "2026-11-29T22:57:13.527Z",
                 "tr-op_order_mismatch-4-fr"):
        assert any(word in line for line in output.splitlines()), word
    assert max(len(line) for line in output.splitlines()) <= 80
