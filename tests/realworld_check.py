"""Scoring a report against a real-world case's expectation (tests/realworld/<case>/expected.json).

A case is right when the verdict's kind is the expected one (or one of `accept_kinds`), its
culprit ranks are the expected ones, and its divergence agrees: none where none is expected, and
where one is, the same counter, the first disagreeing seq as the log prints it, and per rank the
op it issued there (null: never issued it).
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).parent / "realworld"


def cases() -> list[Path]:
    return sorted(p.parent for p in ROOT.glob("*/expected.json"))


def expectation(case: Path) -> dict:
    return json.loads((case / "expected.json").read_text())


def thread(case: Path) -> str:
    return (case / "source.txt").read_text().splitlines()[0].strip()


# Counters that count the same thing under two names: the desync report's `collective #N` is the
# PG's SeqNum.
SAME_COUNTER = {"desync": "pg_seq", "desync_seq": "pg_seq"}


def _op_of(divergence: dict, rank: int) -> tuple[bool, str | None]:
    for group in divergence.get("groups") or []:
        if rank in (group.get("ranks") or []):
            return True, group.get("op")
    return False, None


def _op_name(op: str | None) -> str:
    """`all_reduce` (FR's profiling name) and `ALLREDUCE` (PyTorch's OpType) name one op."""
    return (op or "").upper().replace("_", "").replace("ALLTOALLSINGLE", "ALLTOALLBASE").replace("INTOTENSOR", "BASE")


def divergence_problems(got: dict | None, want: dict | None) -> list[str]:
    if want is None:
        return [] if got is None else [f"divergence {got.get('seq_label')} where none is expected"]
    if got is None:
        return [f"no divergence; expected {want['counter']} {want['seq_printed']}"]
    problems = []
    same = SAME_COUNTER.get(got.get("counter"), got.get("counter")) == SAME_COUNTER.get(want["counter"], want["counter"])
    if not same or got.get("seq_printed") != str(want["seq_printed"]):
        problems.append(f"divergence at {got.get('counter')} {got.get('seq_printed')}, "
                        f"expected {want['counter']} {want['seq_printed']}")
    for rank, op in (want.get("ops") or {}).items():
        listed, issued = _op_of(got, int(rank))
        if op is None and listed and issued is not None:
            problems.append(f"rank {rank} issued {issued}, expected never issued")
        elif op is not None and _op_name(issued) != _op_name(op):
            problems.append(f"rank {rank} op {issued}, expected {op}")
    return problems


def problems(report: dict, want: dict) -> list[str]:
    """What is wrong with `report` for a case expecting `want` (empty: right)."""
    v = report["verdict"]
    out = []
    kinds = [want["kind"], *want.get("accept_kinds", [])]
    if v["kind"] not in kinds:
        out.append(f"kind {v['kind']}, expected {' or '.join(kinds)}")
    if sorted(v["culprit_ranks"]) != sorted(want["culprit_ranks"]):
        out.append(f"culprits {v['culprit_ranks']}, expected {want['culprit_ranks']}")
    return out + divergence_problems(report.get("divergence"), want.get("divergence"))


def false_healthy(report: dict, want: dict) -> bool:
    return report["verdict"]["kind"] == "healthy" and want["kind"] != "healthy"


def false_alarm(report: dict, want: dict) -> bool:
    """A failure named on a healthy run; `unknown` names none (it says what it could not tell)."""
    return want["kind"] == "healthy" and report["verdict"]["kind"] not in ("healthy", "unknown")


# The shapes a paste takes on its way to a bug report (scripts/paste_shapes.py, tests/test_wrapped.py).
def cut_at_width(text: str, width: int) -> str:
    """What a terminal of `width` columns shows: every longer line cut at the width."""
    rows = []
    for line in text.split("\n"):
        while len(line) > width:
            rows, line = rows + [line[:width]], line[width:]
        rows.append(line)
    return "\n".join(rows)


def quoted(text: str) -> str:
    """The text quoted in a reply (Markdown, e-mail)."""
    return "\n".join("> " + line for line in text.split("\n"))


def indented(text: str, indent: str = "    ") -> str:
    """The text as a Markdown code block by indentation (or inside a list item): blank lines stay blank."""
    return "\n".join(indent + line if line else line for line in text.split("\n"))
