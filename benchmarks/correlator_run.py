"""One correlator run, timed from inside: ingest (every file parsed into DuckDB) and verdict.

    python benchmarks/correlator_run.py JOB_DIR [--full]    prints a JSON line

As `correlator analyze`: of repeated lines (NCCL COLL lines per process and communicator, progress
steps per rank) the last ones typed, the rest counted; with --full every line typed (as
`correlator analyze --full` and `ingest`).
"""
from __future__ import annotations

import json
import sys
import time

started = time.perf_counter()
from correlator.pipeline import WINDOW, analyze  # noqa: E402  (import time is part of the run)


def main(job_dir: str, full: bool) -> dict:
    ingested = {}

    def on_file(done: int, total: int) -> None:
        if done == total:
            ingested["at"] = time.perf_counter()

    t0 = time.perf_counter()
    analysis = analyze(job_dir, on_file=on_file, window=None if full else WINDOW)
    t1 = time.perf_counter()
    verdict = analysis.report.get("verdict", {})
    return {"import_s": t0 - started, "ingest_s": ingested.get("at", t1) - t0, "verdict_s": t1 - t0,
            "kind": verdict.get("kind"), "culprits": verdict.get("culprit_ranks"),
            "lines": analysis.report["job"]["lines"], "lines_unparsed": analysis.report["job"]["lines_unparsed"],
            "lines_skimmed": analysis.report["job"]["lines_skimmed"]}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], "--full" in sys.argv[2:])))
