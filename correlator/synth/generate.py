"""generate_job(): simulate a job, let its launcher resolve it, write logs/ and expected.json."""
from __future__ import annotations

import gc
import json
import math
from dataclasses import asdict, replace
from pathlib import Path

from .launchers import run_agents, run_srun, write_kubernetes, write_srun, write_torchrun
from .simulate import JobSim
from .spec import FAULT_TRUTH, JobSpec

COLL_LINE_BYTES = 215
STEP_LINE_BYTES = 70


def sized(spec: JobSpec) -> JobSpec:
    """Apply the size knob: enough steps that the logs reach about target_mb."""
    if not spec.target_mb:
        return spec
    per_step = spec.nranks * (STEP_LINE_BYTES + (COLL_LINE_BYTES * spec.collectives_per_step if spec.coll_lines else 0))
    steps = math.ceil(spec.target_mb * 1e6 / per_step)
    if spec.fault not in ("none", "straggler"):
        steps = math.ceil(steps * 1.5)      # the run stops at the fault step, 2/3 of the way
    return replace(spec, steps=max(spec.steps, steps), target_mb=None)


def _truncate_last_line(sim: JobSim, ranks: list[int]) -> None:
    """Cut each culprit's last written line in the middle (killed while writing, or file copied too early)."""
    for r in ranks:
        records = sim.ranks[r].records
        if not records:
            continue
        i = max(range(len(records)), key=lambda k: records[k][0])
        t, stream, text = records[i]
        body = text.rstrip("\n")
        head, _, last = body.rpartition("\n")
        cut = last[: max(1, len(last) // 2)]
        records[i] = (t, stream, f"{head}\n{cut}" if head else cut)


def truth(sim: JobSim) -> dict:
    s = sim.spec
    scenario, kind = FAULT_TRUTH[s.fault]
    diverges = s.fault in ("stall", "crash", "oom", "exit_early", "missing_collective", "mismatch")
    notes = [f"synthetic {s.launcher} job, NCCL {s.nccl_version}, torch era {s.torch_era}, "
             f"{s.nranks} ranks on {s.nhosts} hosts, {len(sim.pgs)} process groups, fault step {sim.fault_step}"]
    notes += sim.notes
    return {
        "scenario": scenario,
        "kind": kind,
        "culprit_ranks": sim.culprits,
        "world_size": s.nranks,
        "divergence": {"pg": "0", "seq": sim.fault_seq} if diverges else None,
        "launcher": s.launcher,
        "truth": "generated",
        "notes": "; ".join(notes),
        "clock_skew_s": dict(s.clock_skew_s),
        "exit_codes": {str(p.rank): p.exit_code for p in sim.ranks},
        "spec": asdict(s),
    }


def generate_job(out_dir: Path, spec: JobSpec) -> dict:
    # Millions of small tuples: the cyclic GC would rescan them over and over (3-4x slower at GB scale).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _generate(Path(out_dir), spec)
    finally:
        if gc_was_enabled:
            gc.enable()


def _generate(out_dir: Path, spec: JobSpec) -> dict:
    spec = sized(spec)
    sim = JobSim(spec)
    sim.run()
    logs = out_dir / "logs"
    dropped = set(sim.culprits) if spec.drop_culprit_log else set()
    if spec.launcher == "srun":
        srun_lines = run_srun(sim)
        if spec.truncate_culprit_log:
            _truncate_last_line(sim, sim.culprits)
        write_srun(sim, logs, srun_lines, dropped)
    else:
        fqdn = (lambda h: h) if spec.launcher == "kubernetes" else (lambda h: f"{h}.cluster.internal")
        consoles = run_agents(sim, fqdn)
        if spec.truncate_culprit_log:
            _truncate_last_line(sim, sim.culprits)
        writer = write_kubernetes if spec.launcher == "kubernetes" else write_torchrun
        writer(sim, logs, consoles, dropped)
    result = truth(sim)
    (out_dir / "expected.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
