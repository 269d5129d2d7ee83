"""Print the README table of the captured tr-* samples: the truth next to what torchrun said.

Usage: /work/torchenv/bin/python samples/capture/torchrun/summarize.py  (any Python 3 works)

The truth comes from expected.json; torchrun's "Root Cause (first observed failure)" rank is read
from console.log, because comparing the two is the point of the table.
"""

import json
import re
from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent.parent
# the entry index is the failure's position in the agent's list, not always [0]
ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):\n\[\d+\]:\n.*\n.*\n  rank      : (-?\d+)")


def torchrun_root_cause(console: str) -> int | None:
    match = ROOT_CAUSE.search(console)
    return int(match.group(1)) if match else None


def first_exit(expected: dict) -> str:
    """The first worker process to end (a clean exit counts: uneven inputs), with ranks ending within 0.1 s."""
    order = expected.get("exit_order") or []
    if all(e["exit_code"] == 0 for e in order):
        return "-"
    first = order[0]
    ties = [e for e in order if e["after_s"] - first["after_s"] < 0.1]
    return ", ".join(f"{e['rank']} ({e['exit_code']})" for e in ties)


def verdict_of_root_cause(root: int | None, expected: dict) -> str:
    if root is None:
        return "-"
    culprits = expected["culprit_ranks"]
    return f"{root} ({'right' if root in culprits else 'wrong'})"


def row(sample: Path) -> str:
    expected = json.loads((sample / "expected.json").read_text())
    console_path = sample / "logs" / "console.log"   # absent where only some ranks' files were collected
    console = console_path.read_text(errors="replace") if console_path.exists() else ""
    codes = " ".join(f"{r}:{c}" for r, c in expected["exit_codes"].items())
    divergence = expected["divergence"]["seq"] if expected["divergence"] else "-"
    cells = [
        sample.name, expected["kind"], ",".join(map(str, expected["culprit_ranks"])) or "-", str(divergence),
        codes, first_exit(expected), verdict_of_root_cause(torchrun_root_cause(console), expected),
        f"{expected['run_seconds']:.0f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    print("| sample | kind | culprit | div. seq | exit codes (rank:code) | first to exit (code) | torchrun Root Cause | s |")
    print("|---|---|---|---|---|---|---|---|")
    for sample in sorted(SAMPLES.glob("tr-*")):
        if (sample / "expected.json").exists():
            print(row(sample))


if __name__ == "__main__":
    main()
