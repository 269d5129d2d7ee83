"""Print expected.json for one captured SLURM job (called by capture.sh --finalize).

Truth comes from the scenario definition in capture.sh (env), the fault record the workload wrote
at injection time ($TRUTH_DIR, outside logs/) and the job's accounting; the logs are never read.
"""
import json
import os
from pathlib import Path

def fault_records():
    truth_dir = Path(os.environ["TRUTH_DIR"])
    return [json.loads(p.read_text()) for p in sorted(truth_dir.glob("fault-rank*.json"))]


def accounting_summary():
    rows = [line.split("|") for line in Path(os.environ["SACCT_FILE"]).read_text().splitlines()]
    header, rows = rows[0], rows[1:]
    return "; ".join(
        f"{r['JobID']} {r['State']} ExitCode={r['ExitCode']}" + (f" Derived={r['DerivedExitCode']}" if r["DerivedExitCode"] else "")
        for r in (dict(zip(header, row)) for row in rows)
        if not r["JobID"].endswith(".extern")
    )


def main():
    kind = os.environ["KIND"]
    faults = fault_records()
    # every injected fault replaces the culprit's gradient allreduce: the others issue seq N, it does not
    # (or issues a different one); train.py counts collectives on the default PG the way PyTorch's SeqNum does
    # (a fault after the last collective has none: seq null)
    divergence = {"pg": "0", "seq": faults[0]["seq"]} if faults and faults[0]["seq"] is not None else None
    injected = ", ".join(f"--fault {f['fault']} on rank {f['rank']} ({f['host']}) at step {f['step']}, "
                         + (f"collective seq {f['seq']}" if f["seq"] is not None else "after its last collective")
                         for f in faults)
    expected = {
        "scenario": os.environ["SCENARIO"],
        "kind": kind,
        "culprit_ranks": json.loads(os.environ["CULPRITS"]),
        "world_size": 4,
        "divergence": divergence,
        "launcher": "srun",
        "truth": "Scenario defined by samples/capture/slurm/capture.sh; the injected fault, its rank, step and "
                 "collective seq were recorded by train.py at injection time outside logs/; states from sacct after settling.",
        "notes": f"{os.environ['NOTE']}. JobId={os.environ['JOB']}, sbatch --nodes=2 --ntasks-per-node=2 {os.environ['SBATCH_OPTS']}".rstrip()
                 + f", srun {os.environ['SRUN_OPTS']}, train.py {os.environ['TRAIN_ARGS']}."
                 + (f" Injected: {injected}." if injected else " No fault injected.")
                 + f" Accounting: {accounting_summary()}.",
    }
    print(json.dumps(expected, indent=2))


if __name__ == "__main__":
    main()
