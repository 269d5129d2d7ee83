"""python -m correlator.synth OUT_DIR [options]: write one synthetic job (logs/ + expected.json)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .generate import generate_job
from .spec import FAULTS, LAUNCHERS, JobSpec


def _skews(items: list[str]) -> dict[str, float]:
    skews = {}
    for item in items:
        host, _, seconds = item.partition("=")
        if not seconds:
            raise ValueError(f"--skew expects HOST=SECONDS, got {item!r}")
        skews[host] = float(seconds)
    return skews


def parse_args(argv: list[str]) -> tuple[Path, JobSpec]:
    ap = argparse.ArgumentParser(prog="python -m correlator.synth", description=__doc__)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--nranks", type=int, default=8)
    ap.add_argument("--ranks-per-host", type=int, default=4)
    ap.add_argument("--n-pgs", type=int, default=0, help="extra process groups (TP, DP, ...)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--collectives-per-step", type=int, default=4)
    ap.add_argument("--coll-lines", action=argparse.BooleanOptionalAction, default=True,
                    help="NCCL_DEBUG_SUBSYS=INIT,COLL (one line per collective and rank)")
    ap.add_argument("--nccl-version", default="2.21.5")
    ap.add_argument("--torch-era", choices=("old", "new"), default="new")
    ap.add_argument("--launcher", choices=LAUNCHERS, default="torchrun")
    ap.add_argument("--skew", action="append", default=[], metavar="HOST=SECONDS",
                    help="clock error of a host (repeatable); hosts are node1.. (srun), gpu-001.. (torchrun), "
                         "<job>-master-0/<job>-worker-N (kubernetes)")
    ap.add_argument("--fault", choices=FAULTS, default="stall")
    ap.add_argument("--fault-ranks", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument("--fault-step", type=int, default=None)
    ap.add_argument("--mismatch-kind", choices=("size", "dtype"), default="size")
    ap.add_argument("--truncate-culprit-log", action="store_true")
    ap.add_argument("--drop-culprit-log", action="store_true")
    ap.add_argument("--desync-debug", action="store_true")
    ap.add_argument("--timeout-s", type=float, default=600.0)
    ap.add_argument("--job-name", default="train")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-mb", type=float, default=None, help="size knob: add steps until the logs reach ~N MB")
    a = ap.parse_args(argv)
    spec = JobSpec(nranks=a.nranks, ranks_per_host=a.ranks_per_host, n_pgs=a.n_pgs, steps=a.steps,
                   collectives_per_step=a.collectives_per_step, coll_lines=a.coll_lines,
                   nccl_version=a.nccl_version, torch_era=a.torch_era, launcher=a.launcher,
                   clock_skew_s=_skews(a.skew), fault=a.fault, fault_ranks=a.fault_ranks, fault_step=a.fault_step,
                   mismatch_kind=a.mismatch_kind, truncate_culprit_log=a.truncate_culprit_log,
                   drop_culprit_log=a.drop_culprit_log, desync_debug=a.desync_debug, timeout_s=a.timeout_s,
                   job_name=a.job_name, seed=a.seed, target_mb=a.target_mb)
    return a.out_dir, spec


def main(argv: list[str] | None = None) -> int:
    try:
        out_dir, spec = parse_args(sys.argv[1:] if argv is None else argv)
        started = time.perf_counter()
        truth = generate_job(out_dir, spec)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in (out_dir / "logs").rglob("*") if f.is_file())
    print(json.dumps({k: truth[k] for k in ("scenario", "kind", "culprit_ranks", "divergence")}), file=sys.stderr)
    print(f"wrote {size / 1e6:.1f} MB to {out_dir} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
