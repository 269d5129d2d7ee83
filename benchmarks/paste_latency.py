"""Time to a verdict for pastes: `correlator analyze FILE` as a user runs it (a fresh process:
imports, parsing, queries, report) on every real-world case of at most --max-lines lines.
Prints each case's wall time, the median and the worst; a figure, not an assertion.

    .venv/bin/python benchmarks/paste_latency.py [--max-lines 100] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent
CLI = Path(sys.executable).with_name("correlator")


def pastes(max_lines: int) -> list[Path]:
    """Real-world cases held in one file of at most max_lines lines."""
    found = []
    for logs in sorted((ROOT / "tests" / "realworld").glob("*/logs")):
        files = [p for p in logs.rglob("*") if p.is_file()]
        if len(files) == 1 and sum(1 for _ in files[0].open("rb")) <= max_lines:
            found.append(files[0])
    return found


def wall(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run([str(CLI), "analyze", str(path), "-f", "json"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for path in pastes(args.max_lines):
        best = min(wall(path) for _ in range(args.repeat))
        rows.append((best, path.parent.parent.name))
        print(f"{best:6.2f} s  {path.parent.parent.name}")
    times = [t for t, _ in rows]
    print(f"\n{len(rows)} pastes of <= {args.max_lines} lines: median {statistics.median(times):.2f} s, "
          f"worst {max(times):.2f} s (best of {args.repeat}); load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
