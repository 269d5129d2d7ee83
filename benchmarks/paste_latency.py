"""Time to a verdict for pastes: `correlator analyze FILE` as a user runs it (a fresh process:
imports, parsing, queries, report) on every real-world case of at most --max-lines lines.
Prints each case's wall time, the median and the worst; a figure, not an assertion.
`--against CLI` times another build's `correlator` (a worktree of an older commit with its own
venv) on the same pastes, each paste run by both in turn, so both see the same machine.

    .venv/bin/python benchmarks/paste_latency.py [--max-lines 100] [--repeat 3] [--every 1]
        [--against /tmp/old/.venv/bin/correlator]
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


def wall(cli: Path, path: Path) -> float:
    started = time.perf_counter()
    subprocess.run([str(cli), "analyze", str(path), "-f", "json"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def summary(label: str, times: list[float], args) -> str:
    return (f"{label}{len(times)} pastes of <= {args.max_lines} lines: median {statistics.median(times):.2f} s, "
            f"worst {max(times):.2f} s (best of {args.repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--every", type=int, default=1, help="time every Nth paste only")
    parser.add_argument("--against", type=Path, help="another build's correlator command, timed in turn")
    args = parser.parse_args()
    clis = [CLI] + ([args.against] if args.against else [])
    times: dict[Path, list[float]] = {cli: [] for cli in clis}
    for path in pastes(args.max_lines)[args.every - 1::args.every]:
        runs: dict[Path, list[float]] = {cli: [] for cli in clis}
        for _ in range(args.repeat):
            for cli in clis:
                runs[cli].append(wall(cli, path))
        for cli in clis:
            times[cli].append(min(runs[cli]))
        print("  ".join(f"{min(runs[cli]):6.2f} s" for cli in clis) + f"  {path.parent.parent.name}")
    print()
    if args.against:
        print(summary(f"{args.against}: ", times[args.against], args))
    print(summary("this build: " if args.against else "", times[CLI], args) + f"; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
