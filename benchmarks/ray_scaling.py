"""The 16,384-rank job (run.py's `ranks-16384`) in-process against --engine ray on a local Ray,
and a scaling model built from the measured costs that predicts the wall time of a 100k-rank,
500 GB job on 1, 8 and 64 nodes. Figures to read, not assertions.

    .venv/bin/python benchmarks/ray_scaling.py [--data /tmp/correlator-bench] [--cores-per-node 32]

Measured here (one process, every line typed as `ingest` does):
- in-process: `pipeline.analyze(window=None)`; its parse stage alone (`parse_job`).
- Ray local: the same with `engine_ray.group_parser()`; Ray's start; the per-task overhead (no-op tasks).
- per group: `engine_ray.parse_group` of each group, in this process: CPU seconds per input MB.
- the driver: inserting the groups' rows into DuckDB (the merge), and the queries and report.
The model (BENCHMARKS.md states its assumptions):
    T(N) = start + listing + max(B * parse_s_per_mb / (N * cores), B / min(fs_gbps, N * node_gbps))
           + B * merge_s_per_mb + B * query_s_per_mb
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import SCENARIOS, generate, tree_size  # noqa: E402

from correlator import engine_ray, pipeline  # noqa: E402
from correlator.discover import discover  # noqa: E402

TARGET_MB = 500_000       # 100k ranks, 500 GB of logs
TARGET_RANKS = 100_000
NODES = (1, 8, 64)


def timed(fn):
    start = time.perf_counter()
    cpu = time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def per_group_costs(logs: Path) -> tuple[float, float, int]:
    """(parse CPU s per MB, driver merge s per MB, groups): every group parsed here, one at a
    time, then its rows inserted into DuckDB as the driver does."""
    sources, _ = discover(logs)
    groups = engine_ray.split_groups(sources, pipeline.GROUP_BYTES)
    con = pipeline.duckdb.connect()
    pipeline.create_tables(con)
    parse_cpu = merge = 0.0
    for group in groups:
        results, _, cpu = timed(lambda: engine_ray.parse_group(group, None))
        parse_cpu += cpu
        _, wall, _ = timed(lambda: pipeline._insert_results(con, results))
        merge += wall
    mb = sum(s.size or 0 for s in sources) / 1e6
    return parse_cpu / mb, merge / mb, len(groups)


def task_overhead_s(ray, n: int = 200) -> float:
    noop = ray.remote(num_cpus=1)(lambda: None)
    ray.get(noop.remote())
    _, wall, _ = timed(lambda: ray.get([noop.remote() for _ in range(n)]))
    return wall / n


def predict(mb: float, nodes: int, cores: int, start_s: float, parse_s_per_mb: float, merge_s_per_mb: float,
            query_s_per_mb: float, fs_gbps: float, node_gbps: float) -> dict:
    compute = mb * parse_s_per_mb / (nodes * cores)
    read = mb / 1000 / min(fs_gbps, nodes * node_gbps)
    merge, query = mb * merge_s_per_mb, mb * query_s_per_mb
    return {"nodes": nodes, "parse": max(compute, read), "bound": "cpu" if compute >= read else "fs",
            "merge": merge, "query": query, "total": start_s + max(compute, read) + merge + query}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/tmp/correlator-bench"))
    parser.add_argument("--cores-per-node", type=int, default=32)
    parser.add_argument("--fs-gbps", type=float, default=20.0, help="shared filesystem's aggregate read GB/s")
    parser.add_argument("--node-gbps", type=float, default=2.0, help="one node's read GB/s from it")
    args = parser.parse_args()
    logs = generate(SCENARIOS["ranks-16384"], args.data) / "logs"
    size, files = tree_size(logs)
    mb = size / 1e6
    print(f"ranks-16384: {mb:.0f} MB, {files} files; load {os.getloadavg()[0]:.1f} (2 cores, shared)")

    local, local_s, local_cpu = timed(lambda: pipeline.analyze(logs, window=None))
    parsed, local_parse_s, _ = timed(lambda: pipeline.parse_job(logs, window=None))
    pipeline._close(parsed)
    _, list_s, _ = timed(lambda: discover(logs))
    listing_s = list_s * TARGET_RANKS / 16384  # the driver lists the files: per rank's files
    import ray
    _, start_s, _ = timed(lambda: ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False))
    on_ray = engine_ray.group_parser()
    remote, ray_s, ray_cpu = timed(lambda: pipeline.analyze(logs, window=None, parse_groups=on_ray))
    parsed, ray_parse_s, _ = timed(lambda: pipeline.parse_job(logs, window=None, parse_groups=on_ray))
    pipeline._close(parsed)
    overhead = task_overhead_s(ray)
    ray.shutdown()
    parse_s_per_mb, merge_s_per_mb, groups = per_group_costs(logs)
    query_s_per_mb = max(local_s - local_parse_s, 0.0) / mb

    print("\nrun | wall s | parse stage s | driver CPU s | same report")
    print("--- | --- | --- | --- | ---")
    print(f"in-process (2 threads) | {local_s:.1f} | {local_parse_s:.1f} | {local_cpu:.1f} | -")
    print(f"ray local ({os.cpu_count()} CPUs, {groups} groups) | {ray_s:.1f} | {ray_parse_s:.1f} | {ray_cpu:.1f} | "
          f"{'yes' if remote.report == local.report else 'NO'}")
    print(f"\nmeasured: ray start {start_s:.1f} s; task overhead {overhead * 1000:.1f} ms; "
          f"parse {parse_s_per_mb * 1000:.1f} CPU ms/MB; driver merge {merge_s_per_mb * 1000:.1f} ms/MB; "
          f"queries+report {query_s_per_mb * 1000:.1f} ms/MB; driver's file listing {list_s:.1f} s")
    print(f"\nprediction, {TARGET_MB / 1000:.0f} GB, {args.cores_per_node} cores/node, shared FS {args.fs_gbps} GB/s "
          f"aggregate, {args.node_gbps} GB/s per node, start+listing {start_s + listing_s:.0f} s:")
    print("nodes | parse s (bound) | driver merge s | queries s | total s | total h")
    print("--- | --- | --- | --- | --- | ---")
    for nodes in NODES:
        p = predict(TARGET_MB, nodes, args.cores_per_node, start_s + listing_s, parse_s_per_mb, merge_s_per_mb,
                    query_s_per_mb, args.fs_gbps, args.node_gbps)
        print(f"{nodes} | {p['parse']:.0f} ({p['bound']}) | {p['merge']:.0f} | {p['query']:.0f} | {p['total']:.0f} | "
              f"{p['total'] / 3600:.2f}")


if __name__ == "__main__":
    main()
