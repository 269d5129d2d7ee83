"""Benchmarks: correlator against the `grep -c opCount` floor and a naive Python line loop, on the
same generated files, in one run. Prints a table (and writes results.json next to the inputs).

    .venv/bin/python benchmarks/run.py                        # the default set (see SCENARIOS)
    .venv/bin/python benchmarks/run.py coll-1g ranks-4096     # some of them
    .venv/bin/python benchmarks/run.py --list

Inputs are generated with correlator.synth into --data (default /tmp/correlator-bench) and reused
while their generator arguments are unchanged. Every measurement is a fresh subprocess: wall time,
CPU time and peak RSS come from that child alone (os.wait4). The machine's load average is printed
with each row: on a shared machine wall time is only comparable at similar load; CPU time less so.
These are figures to read, not assertions.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


@dataclass(frozen=True)
class Scenario:
    name: str
    synth_args: tuple[str, ...]


SCENARIOS = {s.name: s for s in (
    Scenario("coll-100m", ("--nranks", "64", "--coll-lines", "--target-mb", "107", "--fault", "stall", "--fault-ranks", "3")),
    Scenario("coll-1g", ("--nranks", "64", "--coll-lines", "--target-mb", "1070", "--fault", "stall", "--fault-ranks", "3")),
    Scenario("coll-3g", ("--nranks", "64", "--coll-lines", "--target-mb", "3210", "--fault", "stall", "--fault-ranks", "3")),
    # One `srun -l` output file for all 16 ranks, their lines interleaved (the worst case of the
    # window: no block of one process, see parsers/bulk/skim.py skim_blocks).
    Scenario("srun-1g", ("--nranks", "16", "--coll-lines", "--launcher", "srun", "--target-mb", "1070", "--fault",
                         "stall", "--fault-ranks", "3")),
    Scenario("coll-5g", ("--nranks", "64", "--coll-lines", "--target-mb", "5350", "--fault", "stall", "--fault-ranks", "3")),
    Scenario("ranks-4096", ("--nranks", "4096", "--ranks-per-host", "8", "--no-coll-lines", "--fault", "stall",
                            "--fault-ranks", "1234")),
    Scenario("ranks-16384", ("--nranks", "16384", "--ranks-per-host", "8", "--no-coll-lines", "--fault", "stall",
                             "--fault-ranks", "12345")),
    # The same jobs with TORCH_NCCL_DESYNC_DEBUG=1: without it only the ranks whose watchdog fired
    # before the launcher's SIGTERM report a SeqNum and the verdict is rightly `unknown`; with it
    # the desync report names the rank that never joined.
    Scenario("ranks-4096-desync", ("--nranks", "4096", "--ranks-per-host", "8", "--no-coll-lines", "--fault", "stall",
                                   "--fault-ranks", "1234", "--desync-debug")),
    Scenario("ranks-16384-desync", ("--nranks", "16384", "--ranks-per-host", "8", "--no-coll-lines", "--fault",
                                    "stall", "--fault-ranks", "12345", "--desync-debug")),
)}
DEFAULT = ("coll-100m", "coll-1g", "ranks-4096", "ranks-16384")


def generate(scenario: Scenario, data: Path) -> Path:
    """The job directory, generated unless an identical one is already there."""
    job = data / scenario.name
    stamp = job / "synth-args.json"
    if stamp.exists() and json.loads(stamp.read_text()) == list(scenario.synth_args):
        return job
    shutil.rmtree(job, ignore_errors=True)
    subprocess.run([PYTHON, "-m", "correlator.synth", str(job), "--seed", "1", *scenario.synth_args],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stamp.write_text(json.dumps(list(scenario.synth_args)))
    return job


def tree_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def measure(cmd: list[str]) -> dict:
    """Run `cmd`; its wall time, CPU time, peak RSS (of this child alone, by wait4) and stdout."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=HERE.parent)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):  # grep -c exits 1 when nothing matched
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd[:3])} failed: {err.read().decode()[-800:]}")
        out.seek(0)
        stdout = out.read().decode()
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "load": load, "stdout": stdout}


def run_scenario(scenario: Scenario, data: Path, repeat: int) -> list[dict]:
    job = generate(scenario, data)
    logs = job / "logs"
    size, nfiles = tree_size(logs)
    expected = json.loads((job / "expected.json").read_text())
    rows = []
    for attempt in range(repeat):
        row = {"scenario": scenario.name, "attempt": attempt + 1, "mb": size / 1e6, "files": nfiles,
               "expected": [expected["kind"], expected["culprit_ranks"]]}
        grep = measure(["grep", "-rc", "opCount", str(logs)])
        row["grep"] = {k: grep[k] for k in ("wall_s", "cpu_s", "load")}
        naive = measure([PYTHON, str(HERE / "naive_parser.py"), str(logs)])
        row["naive"] = {k: naive[k] for k in ("wall_s", "cpu_s", "rss_mb", "load")}
        ours = measure([PYTHON, str(HERE / "correlator_run.py"), str(logs)])
        row["correlator"] = {k: ours[k] for k in ("wall_s", "cpu_s", "rss_mb", "load")} | json.loads(ours["stdout"])
        full = measure([PYTHON, str(HERE / "correlator_run.py"), str(logs), "--full"])
        row["full"] = {k: full[k] for k in ("wall_s", "cpu_s", "rss_mb", "load")} | json.loads(full["stdout"])
        rows.append(row)
        print_row(row)
    return rows


COLUMNS = ("scenario", "MB", "files", "load", "grep s", "naive s", "ingest s", "MB/s", "verdict s",
           "cpu s", "rss MB", "naive MB", "vs grep", "vs naive", "verdict ok", "skimmed", "full s", "full rss MB",
           "full ok")


def print_header() -> None:
    print(" | ".join(COLUMNS))
    print(" | ".join("---" for _ in COLUMNS), flush=True)


def _verdict_ok(run: dict, row: dict) -> str:
    ok = [run["kind"], sorted(run["culprits"] or [])] == [row["expected"][0], sorted(row["expected"][1])]
    return "yes" if ok else f"no: {run['kind']} {run['culprits']}"


def print_row(row: dict) -> None:
    c, g, n, f = row["correlator"], row["grep"], row["naive"], row["full"]
    cells = (row["scenario"], f"{row['mb']:.0f}", row["files"], f"{c['load']:.1f}", f"{g['wall_s']:.2f}",
             f"{n['wall_s']:.1f}", f"{c['ingest_s']:.1f}", f"{row['mb'] / c['ingest_s']:.1f}",
             f"{c['verdict_s']:.1f}", f"{c['cpu_s']:.1f}", f"{c['rss_mb']:.0f}", f"{n['rss_mb']:.0f}",
             f"{c['verdict_s'] / g['wall_s']:.0f}x", f"{n['wall_s'] / c['verdict_s']:.2f}x",
             _verdict_ok(c, row), c["lines_skimmed"], f"{f['verdict_s']:.1f}", f"{f['rss_mb']:.0f}",
             _verdict_ok(f, row))
    print(" | ".join(str(x) for x in cells), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", default=list(DEFAULT))
    ap.add_argument("--data", type=Path, default=Path("/tmp/correlator-bench"))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for s in SCENARIOS.values():
            print(s.name, " ".join(s.synth_args))
        return
    args.data.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}")
    print_header()
    results = []
    for name in args.scenarios:
        results.extend(run_scenario(SCENARIOS[name], args.data, args.repeat))
    (args.data / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
