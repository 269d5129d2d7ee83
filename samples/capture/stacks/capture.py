"""Run the stack x launcher x fault matrix and write samples/<name>/{logs/,expected.json}.

Usage (from the repository root; mpirun from Debian's openmpi-bin; the srun samples need the local
SLURM: /work/shared/tools/slurm_local.sh start):
  /work/torchenv/bin/python samples/capture/stacks/capture.py [--only NAME ...] [--launcher L ...] [--out DIR]
  /work/torchenv/bin/python samples/capture/stacks/capture.py --list

expected.json is built from what the run itself reported: the scenario definition, the fault record the
injected rank wrote to a truth directory outside logs/ (step, 1-based SeqNum of the next collective on
the default PG), and every rank's exit code (torchrun: samples/capture/torchrun/launch.py; mpirun and
srun: exitrec.py around each rank). The logs are never read here.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent.parent
REPO = SAMPLES.parent
LAUNCH = HERE.parent / "torchrun" / "launch.py"
EXITREC = HERE / "exitrec.py"
PYTHON = sys.executable
RUN_TIMEOUT_SECONDS = 240
SLURM_LOG = Path(os.environ.get("SLURM_LOCAL_DIR", "/tmp/slurm-local")) / "log"
SLURM_WORK = Path(os.environ.get("CAPTURE_WORK", "/tmp/stacks-capture"))
SACCT_FORMAT = "JobID,JobName,State,ExitCode,DerivedExitCode,Start,End,NodeList,MaxRSS,MaxRSSTask,MaxRSSNode"

STACKS = {"hf": "hf_trainer.py", "accel": "accel.py", "lightning": "lightning_ddp.py", "ddp": "ddp.py", "fsdp": "fsdp.py"}
STACK_NAMES = {"hf": "transformers Trainer", "accel": "accelerate", "lightning": "Lightning DDP", "ddp": "PyTorch DDP",
               "fsdp": "PyTorch FSDP2"}
DDP_STACKS = ("hf", "accel", "lightning", "ddp")  # DDP underneath: segfaults with DETAIL on torch 2.13 CPU
DETAIL_ENV = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"}


MISSING_RANKS_TRUTH = ("The capture exported WORLD_SIZE (`world_size`) and started fewer processes (mpirun -np, "
                       "`processes_started`): the culprits are the ranks no process had, from the launch itself; rank 0 "
                       "recorded the world it initialised for and how many processes mpirun started (OMPI_COMM_WORLD_SIZE), "
                       "outside logs/; exit codes recorded by exitrec.py around each started rank (null: never started). "
                       "The logs were not read.")


@dataclass(frozen=True)
class Scenario:
    kind: str
    culprits: str = "fault"  # fault | rank0 | none | absent (the ranks of the stated world never started)
    divergence_known: bool = True
    description: str = ""
    note: str = ""
    truth: str = ""  # where the truth comes from, where not the fault hooks' record


SCENARIOS = {
    "healthy": Scenario("healthy", "none", False, "no fault"),
    "straggler": Scenario("straggler", divergence_known=False,
                          description="the injected rank sleeps 0.3 s in data loading every step",
                          note="No failure; the stack keeps the ranks in lockstep, so only the per-rank data_time of the step line shows the slow rank."),
    "stalled_rank": Scenario("rank_stalled", description="the injected rank sleeps 120 s in data loading at the fault step",
                             note="The others time out after 20 s while the culprit still sleeps; the launcher then kills it."),
    "crash_exception": Scenario("rank_crashed", description="the injected rank raises RuntimeError before the fault step's forward"),
    "segfault_all": Scenario("rank_crashed", "none", False,
                             "every rank reads address 0 (SIGSEGV) before the fault step's forward",
                             "Common mode: every rank dies of the same signal at the same point; no culprit."),
    "crash_sigkill": Scenario("rank_crashed", description="the injected rank SIGKILLs itself at the fault step (as an OOM killer would)"),
    "missing_collective": Scenario("missing_collective", description="the injected rank skips the app's metrics all_reduce at the fault step",
                                   note="The culprit's next collective (BROADCAST numel 1) meets the others' ALLREDUCE (numel 2)."),
    "rank0_only_collective": Scenario("missing_collective", "rank0",
                                      description="rank 0 calls a barrier in its checkpoint branch after the fault step",
                                      note="Culprit = rank 0 by the minority convention."),
    "op_order_mismatch": Scenario("collective_mismatch",
                                  description="at the fault step the injected rank broadcasts the stop flag before the metrics all_reduce"),
    "shape_mismatch": Scenario("collective_mismatch", description="from the fault step the injected rank all_reduces 3 metrics instead of 2"),
    "uneven_inputs": Scenario("rank_exited_early", description="the injected rank has fault_step-1 batches, leaves its loop and exits 0",
                              note="The culprit exits 0; the others wait in the next step's collectives."),
    "oom": Scenario("rank_crashed", description="the injected rank allocates 100 MB every 0.2 s from the fault step (sbatch --mem)",
                    note="SLURM's memory enforcement (JobAcctGatherParams=OverMemoryKill, no cgroup) kills the whole step; "
                         "culprit = the rank holding the most memory (the allocating one)."),
    "srun_wait": Scenario("rank_crashed", divergence_known=False,
                          description="at the fault step every rank runs a 12 s local evaluation (no collectives); the injected rank raises at its start",
                          note="srun --wait=3 (no --kill-on-bad-exit): 3 s after the first task ended srun terminates the others, "
                               "which are still evaluating: the termination is collateral, the culprit is the task that ended first. "
                               "No rank waited in a collective, so no divergence."),
    # the shapes only real-world cases proved (issue #14: a captured sample for every rule)
    "op_order_pair": Scenario("collective_mismatch", "none",
                              description="two ranks; at the fault step the injected rank broadcasts the stop flag before the "
                                          "metrics all_reduce, the other all_reduces first",
                              note="With two ranks neither side is a minority: each ran a different collective at the same seq. "
                                   "The runtime (DETAIL) names the mismatch; nothing tells whose code path is the odd one, so by "
                                   "the minority convention there is no culprit (the rank the fault was injected in is in `injected`)."),
    "after_loop_barrier": Scenario("missing_collective", "rank0",
                                   description="after the loop and the final barrier, rank 0 alone enters a barrier in its "
                                               "final-checkpoint branch; the others destroy the process group and exit 0",
                                   note="Culprit = rank 0, which issued a collective the others never issued; it fails once they have left."),
    "gather_shape_mismatch": Scenario("collective_mismatch",
                                      description="at the fault step every rank all_gathers its evaluation predictions, printing "
                                                  "their shape first; the injected rank's tensor is [15, 4], the others' [16, 4]"),
    "missing_ranks": Scenario("init_failure", "absent", False,
                              description="the job exports WORLD_SIZE (the size it was written for) but mpirun starts half as "
                                          "many processes; the started ranks wait in init_process_group for the others",
                              note="Culprits = the ranks of the stated world that no process ever had (never started); "
                                   "init's store gives up after the 20 s timeout.",
                              truth=MISSING_RANKS_TRUTH),
    "missing_ranks_cancelled": Scenario("init_failure", "absent", False,
                                        description="as missing_ranks, with init's timeout left long (1800 s); the user interrupts "
                                                    "mpirun (SIGINT, as Ctrl-C does) while the started ranks still wait in init",
                                        note="Culprits = the ranks of the stated world that no process ever had (never started). "
                                             "The interrupt is the user's, not a cause.",
                                        truth=MISSING_RANKS_TRUTH),
    "error_all": Scenario("rank_crashed", "none", False,
                          description="every rank fails to open the same missing file (FileNotFoundError, not caught) "
                                      "before init_process_group",
                          note="Common mode: every rank died the same way at the same point; no culprit. Under mpirun "
                               "without --tag-output no line of the ranks' tracebacks carries its rank (torch's own `[rankN]:` "
                               "prefix on uncaught exceptions comes only after init_process_group)."),
    "oom_before_init": Scenario("rank_crashed", divergence_known=False,
                                description="before init_process_group the injected rank sizes a buffer from a per-host "
                                            "cache whose token count is corrupt and allocates 4 TiB: the CPU allocator "
                                            "refuses (not caught)",
                                note="Under mpirun without --tag-output the traceback carries no rank (torch's `[rankN]:` "
                                     "prefix comes only after init_process_group); mpirun names the process that exited "
                                     "non-zero and terminates the others, which wait in init. No collective was issued."),
    "rank0_eval_broadcast": Scenario("rank_stalled", "rank0",
                                     description="at the fault step rank 0 runs a 60 s validation of its own between the "
                                                 "metrics all_reduce and the stop-flag BROADCAST it roots; the others wait in the broadcast",
                                     note="Culprit = rank 0, the root the others waited for; it reports nothing and is SIGTERMed "
                                          "by the launcher once the others time out (20 s)."),
    "bad_master_addr": Scenario("init_failure", "none", False,
                                description="the job's MASTER_ADDR names a host that does not exist (a typo in the job script): "
                                            "every rank fails to reach the rendezvous store",
                                note="One configuration for all ranks, no rank at fault: no culprit.",
                                truth="The capture set MASTER_ADDR to a name that does not resolve, for every rank alike "
                                      "(samples/capture/stacks/capture.py); exit codes recorded by exitrec.py around each rank. "
                                      "The logs were not read."),
}


@dataclass(frozen=True)
class Sample:
    stack: str
    launcher: str  # torchrun | mpirun | srun
    scenario: str
    nranks: int
    fault_rank: int = 1
    detail: bool = False
    fr: bool = False
    steps: int = 8
    notes: str = ""
    launched: int | None = None  # processes the launcher starts, where fewer than the stated world (nranks)
    timeout: float | None = None  # init_process_group's timeout, where not the workload's 20 s
    cancel_after: float | None = None  # SIGINT to the launcher after this many seconds (a user's Ctrl-C)
    master_addr: str = "127.0.0.1"
    tag_output: bool = True  # mpirun --tag-output ([1,R]<stderr>: on every line)

    @property
    def name(self) -> str:
        suffix = "-detail" if self.detail else "-fr" if self.fr else ""
        suffix += "" if self.tag_output else "-untagged"
        return f"{self.stack}-{self.launcher}-{self.scenario}-{self.nranks}{suffix}"

    @property
    def ddp_detail_segfault(self) -> bool:
        return self.detail and self.stack in DDP_STACKS


S = Sample
SAMPLE_LIST = [
    # transformers Trainer
    S("hf", "torchrun", "healthy", 4),
    S("hf", "torchrun", "straggler", 4, 2),
    S("hf", "torchrun", "stalled_rank", 4, 2),
    S("hf", "torchrun", "crash_exception", 4, 1),
    S("hf", "torchrun", "crash_sigkill", 8, 5),
    S("hf", "torchrun", "missing_collective", 4, 3, fr=True),
    S("hf", "torchrun", "shape_mismatch", 4, 2),
    S("hf", "torchrun", "healthy", 4, detail=True),
    S("hf", "mpirun", "segfault_all", 4),
    S("hf", "mpirun", "op_order_mismatch", 4, 1),
    S("hf", "srun", "oom", 4, 3),
    # accelerate
    S("accel", "torchrun", "healthy", 4),
    S("accel", "torchrun", "straggler", 4, 1),
    S("accel", "torchrun", "op_order_mismatch", 4, 2, fr=True),
    S("accel", "torchrun", "rank0_only_collective", 4, 0),
    S("accel", "torchrun", "uneven_inputs", 4, 3),
    S("accel", "mpirun", "crash_exception", 4, 2),
    S("accel", "mpirun", "stalled_rank", 4, 1, fr=True),
    S("accel", "mpirun", "missing_collective", 8, 6),
    S("accel", "srun", "crash_sigkill", 4, 2),
    # Lightning
    S("lightning", "torchrun", "healthy", 4),
    S("lightning", "torchrun", "straggler", 4, 3),
    S("lightning", "torchrun", "shape_mismatch", 4, 1),
    S("lightning", "torchrun", "stalled_rank", 4, 2),  # at 8 ranks its 7 victims' Lightning tracebacks, tee'd twice, passed 300 KB
    S("lightning", "torchrun", "healthy", 4, detail=True),
    S("lightning", "mpirun", "crash_exception", 4, 3),
    S("lightning", "mpirun", "missing_collective", 4, 2),
    S("lightning", "mpirun", "healthy", 8),
    S("lightning", "srun", "crash_sigkill", 4, 1),
    S("lightning", "srun", "straggler", 4, 2),
    # plain DDP
    S("ddp", "torchrun", "straggler", 8, 6),
    S("ddp", "torchrun", "segfault_all", 4),
    S("ddp", "torchrun", "op_order_mismatch", 4, 1, fr=True),
    S("ddp", "torchrun", "healthy", 4, detail=True),
    S("ddp", "mpirun", "healthy", 4),
    S("ddp", "mpirun", "crash_sigkill", 4, 3),
    S("ddp", "mpirun", "uneven_inputs", 4, 2),
    S("ddp", "mpirun", "rank0_only_collective", 4, 0),
    S("ddp", "mpirun", "shape_mismatch", 8, 5),
    S("ddp", "srun", "crash_exception", 4, 2),
    S("ddp", "srun", "oom", 4, 1),
    S("ddp", "srun", "srun_wait", 4, 3),
    S("ddp", "srun", "missing_collective", 8, 5),
    S("ddp", "srun", "stalled_rank", 4, 2),
    # FSDP2
    S("fsdp", "torchrun", "healthy", 4),
    S("fsdp", "torchrun", "straggler", 4, 1),
    S("fsdp", "torchrun", "missing_collective", 4, 2, detail=True),
    S("fsdp", "torchrun", "shape_mismatch", 4, 3, detail=True),
    S("fsdp", "torchrun", "crash_exception", 8, 4),
    S("fsdp", "torchrun", "uneven_inputs", 4, 1, fr=True),
    S("fsdp", "mpirun", "stalled_rank", 4, 3),
    S("fsdp", "mpirun", "op_order_mismatch", 4, 2, fr=True),
    S("fsdp", "srun", "crash_sigkill", 4, 3),
    S("fsdp", "srun", "healthy", 8),
    # the shapes only real-world cases proved (issue #14: a captured sample for every rule)
    S("fsdp", "torchrun", "op_order_pair", 2, 1, detail=True),
    S("ddp", "torchrun", "after_loop_barrier", 4, 0),
    S("ddp", "mpirun", "after_loop_barrier", 4, 0),
    S("ddp", "torchrun", "gather_shape_mismatch", 4, 2),
    S("ddp", "mpirun", "missing_ranks", 4, 0, launched=2),
    S("ddp", "mpirun", "missing_ranks_cancelled", 4, 0, launched=2, timeout=1800, cancel_after=30),
    S("ddp", "mpirun", "bad_master_addr", 4, 0, master_addr="trainer-head.cluster.invalid"),
    S("ddp", "mpirun", "error_all", 4, 0, tag_output=False),
    S("ddp", "mpirun", "oom_before_init", 4, 2, tag_output=False),
    S("ddp", "torchrun", "rank0_eval_broadcast", 4, 0),
]


def run_logged(command: list[str], env: dict, console: Path, cancel_after: float | None = None) -> int:
    """Run the launcher with stdout+stderr into console; past RUN_TIMEOUT_SECONDS kill its process group.
    With cancel_after, interrupt the launcher (SIGINT, what Ctrl-C sends) after that many seconds."""
    with open(console, "w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        if cancel_after is not None:
            try:
                return proc.wait(timeout=cancel_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=RUN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return -999


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def workload_args(sample: Sample) -> list[str]:
    return [str(HERE / STACKS[sample.stack]), "--scenario", sample.scenario, "--fault-rank", str(sample.fault_rank),
            "--steps", str(sample.steps), *(["--timeout", f"{sample.timeout:g}"] if sample.timeout else [])]


def run_env(sample: Sample, logs: Path, truth_dir: Path) -> dict:
    # nothing of an outer launcher's identity (a sample's own WORLD_SIZE is set by run_mpirun)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL_", "OMPI_", "PMIX_", "SLURM_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    env.update(CAPTURE_TRUTH_DIR=str(truth_dir), PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    if sample.detail:
        env.update(DETAIL_ENV)
    if sample.fr:
        (logs / "flight_recorder").mkdir()
        env["TORCH_FR_BUFFER_SIZE"] = "2000"
        env["TORCH_FR_DUMP_TEMP_FILE"] = str(logs / "flight_recorder" / "fr_trace_rank_")
    return env


def exported(env: dict) -> list[str]:
    return [k for k in sorted(env) if k.startswith(("TORCH_", "CAPTURE_", "HF_", "PYTHONUNBUFFERED", "OMP_NUM", "TOKENIZERS", "MASTER_",
                                                  "WORLD_SIZE"))]


# ---------------------------------------------------------------- launchers

def run_torchrun(sample: Sample, logs: Path, env: dict) -> tuple[list[str], int, dict]:
    command = [PYTHON, str(LAUNCH), "--nproc-per-node", str(sample.nranks), "--master-addr", "127.0.0.1",
               "--master-port", str(free_port()), "--log-dir", str(logs / "torchrun"), "--redirects", "3", "--tee", "3",
               *workload_args(sample)]
    rc = run_logged(command, env, logs / "console.log")
    record = Path(env["CAPTURE_TRUTH_DIR"]) / "workers.json"
    workers = json.loads(record.read_text()) if record.exists() else {}
    outcome = {
        "exit_codes": {r: w["exit_code"] for r, w in sorted(workers.items(), key=lambda kv: int(kv[0]))},
        "exit_times": {r: w["exit_seen_at"] for r, w in workers.items()},
        "signalled_by_agent": sorted(int(r) for r, w in workers.items() if w["signalled_by_agent"]),
        "worker_pids": {r: w["pid"] for r, w in workers.items()},
    }
    return ["torchrun", *command[2:]], rc, outcome


def exit_records(truth_dir: Path, nranks: int) -> dict:
    records = {}
    for rank in range(nranks):
        path = truth_dir / f"exit_rank{rank}.json"
        records[str(rank)] = json.loads(path.read_text()) if path.exists() else None
    return {
        "exit_codes": {r: (rec["exit_code"] if rec else None) for r, rec in records.items()},
        "exit_times": {r: (rec["end_time"] if rec else None) for r, rec in records.items()},
        "signals_forwarded": {r: rec["signals_forwarded"] for r, rec in records.items() if rec and rec["signals_forwarded"]},
        "worker_pids": {r: rec["pid"] for r, rec in records.items() if rec},
    }


def run_mpirun(sample: Sample, logs: Path, env: dict) -> tuple[list[str], int, dict]:
    env = dict(env, MASTER_ADDR=sample.master_addr, MASTER_PORT=str(free_port()))
    if sample.launched is not None:  # the job script's own size, for a world mpirun does not start
        env["WORLD_SIZE"] = str(sample.nranks)
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", *(["--tag-output"] if sample.tag_output else []),
               "-np", str(sample.launched or sample.nranks),
               "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    for key in exported(env):
        command += ["-x", key]
    command += [PYTHON, str(EXITREC), "--", PYTHON, *workload_args(sample)]
    rc = run_logged(command, env, logs / "console.log", sample.cancel_after)
    return command, rc, exit_records(Path(env["CAPTURE_TRUTH_DIR"]), sample.nranks)


def slurm_options(sample: Sample) -> tuple[list[str], list[str]]:
    sbatch = ["--job-name=train", f"--nodes={sample.nranks // 2}", "--ntasks-per-node=2", "--output=slurm-%j.out", "--time=4"]
    srun = ["-l"]
    if sample.scenario == "oom":
        sbatch.append("--mem=1200M")
    if sample.scenario == "srun_wait":
        srun.append("--wait=3")
    else:
        srun.append("--kill-on-bad-exit=1")
    return sbatch, srun


def now_ms() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"


def cut_window(src: Path, dst: Path, start: str, end: str) -> None:
    if not src.exists():
        return
    lines = [line for line in src.read_text(errors="replace").splitlines(keepends=True)
             if start <= line[1:24] <= end]
    dst.write_text("".join(lines))


def run_srun(sample: Sample, logs: Path, env: dict) -> tuple[list[str], int, dict]:
    sbatch_opts, srun_opts = slurm_options(sample)
    SLURM_WORK.mkdir(parents=True, exist_ok=True)
    jobdir = Path(tempfile.mkdtemp(prefix="job.", dir=SLURM_WORK))  # neutral: shows in scontrol
    env = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    exports = " ".join(f"{k}={env[k]}" for k in exported(env))
    srun_line = " ".join(["srun", *srun_opts, PYTHON, str(EXITREC), "--", PYTHON, *workload_args(sample)])
    (jobdir / "job.sbatch").write_text(f"#!/bin/bash\nexport {exports}\n{srun_line}\n")
    start = now_ms()
    job = subprocess.run(["sbatch", "--parsable", *sbatch_opts, "job.sbatch"], cwd=jobdir, env=env, check=True,
                         capture_output=True, text=True).stdout.strip().split(";")[0]
    (jobdir / "jobid").write_text(job)
    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job])
        time.sleep(1)
    time.sleep(3)  # the stepds' and the ctld's last lines
    end = now_ms()
    (logs / "scontrol.txt").write_text(subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout)
    for out in jobdir.glob(f"*{job}*.out"):
        shutil.copy(out, logs / out.name)
    cut_window(SLURM_LOG / "slurmctld.log", logs / "slurmctld.log", start, end)
    nodelist = re.search(r"^\s*NodeList=(\S+)", (logs / "scontrol.txt").read_text(), re.M)
    nodes = subprocess.run(["scontrol", "show", "hostnames", nodelist.group(1)], capture_output=True, text=True).stdout.split()
    for node in nodes:
        cut_window(SLURM_LOG / f"slurmd-{node}.log", logs / f"slurmd-{node}.log", start, end)
    jobcomp = [line for line in (SLURM_LOG / "jobcomp.log").read_text().splitlines(keepends=True)
               if line.startswith(f"JobId={job} ")] if (SLURM_LOG / "jobcomp.log").exists() else []
    if jobcomp:
        (logs / "jobcomp.log").write_text("".join(jobcomp))
    write_sacct(job, logs)
    outcome = exit_records(Path(env["CAPTURE_TRUTH_DIR"]), sample.nranks)
    outcome["job_id"] = job
    return ["sbatch", *sbatch_opts, "job.sbatch:", srun_line], 0, outcome


def write_sacct(job: str, logs: Path) -> None:
    out = subprocess.run(["sacct", "--parsable2", "-j", job, f"--format={SACCT_FORMAT}"], capture_output=True, text=True).stdout
    (logs / "sacct.txt").write_text(out)


LAUNCHERS = {"torchrun": run_torchrun, "mpirun": run_mpirun, "srun": run_srun}


# ---------------------------------------------------------------- truth

def versions() -> dict:
    out = {}
    for mod in ("torch", "transformers", "accelerate", "lightning", "mpi4py"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            pass
    return out


def exit_order(outcome: dict) -> list[dict]:
    seen = sorted((t, int(r)) for r, t in outcome["exit_times"].items() if t)
    if not seen:
        return []
    first = seen[0][0]
    return [{"rank": r, "after_s": round(t - first, 2), "exit_code": outcome["exit_codes"][str(r)]} for t, r in seen]


def build_expected(sample: Sample, command: list[str], env: dict, truth_dir: Path, elapsed: float, rc: int,
                   outcome: dict) -> tuple[dict, list[str]]:
    scenario = SCENARIOS[sample.scenario]
    records = [json.loads(p.read_text()) for p in sorted(truth_dir.glob("fault_rank*.json"), key=lambda p: int(p.stem[10:]))]
    injected = next((r for r in records if r["rank"] == sample.fault_rank), records[0] if records else None)
    kind = scenario.kind
    culprits = {"fault": [sample.fault_rank], "rank0": [0], "none": [],
                "absent": list(range(sample.launched or sample.nranks, sample.nranks))}[scenario.culprits]
    divergence = {"pg": "0", "seq": injected["seq"]} if scenario.divergence_known and injected else None
    notes = [scenario.note]
    problems = []
    codes = [c for c in outcome["exit_codes"].values()]
    if sample.ddp_detail_segfault:
        # the real behaviour, not the design: DDP over the DETAIL wrapper PG dies in its constructor
        if records or any(c not in (-11, -15, 139) for c in codes) or -11 not in codes and 139 not in codes:
            problems.append(f"expected every rank to segfault in DDP construction, got exit codes {codes} and records {records}")
        kind, culprits, divergence = "rank_crashed", [], None
        notes = [f"Designed as '{sample.scenario}', but with TORCH_DISTRIBUTED_DEBUG=DETAIL every rank died of SIGSEGV "
                 "while constructing DDP (torch 2.13 CPU: the DETAIL wrapper process group crashes in DDP's "
                 "Logger.set_construction_data_and_log) before any training step. Common mode: no culprit."]
    elif sample.scenario not in ("healthy", "straggler", "bad_master_addr") and not records:
        problems.append("no fault record: the fault was never injected")
    if sample.scenario in ("healthy", "straggler") and not sample.ddp_detail_segfault and any(c != 0 for c in codes):
        problems.append(f"a {sample.scenario} run ended with exit codes {codes}")
    if sample.scenario in ("segfault_all", "error_all") and len(records) != sample.nranks:
        problems.append(f"only {len(records)} of {sample.nranks} ranks reached the segfault")
    notes.append(sample.notes)
    expected = {
        "scenario": sample.scenario,
        "kind": kind,
        "culprit_ranks": culprits,
        "world_size": sample.nranks,
        **({"processes_started": sample.launched} if sample.launched is not None else {}),
        **({"cancelled_after_s": sample.cancel_after} if sample.cancel_after is not None else {}),
        "divergence": divergence,
        "launcher": sample.launcher,
        "stack": sample.stack,
        "truth": scenario.truth or ("Fault injected by samples/capture/stacks/faults.py on the named rank, which recorded its step and "
                  "the 1-based SeqNum of the next collective on the default PG (ProcessGroup._get_sequence_number_for_group) "
                  "outside logs/; exit codes recorded from the worker processes ("
                  + ("samples/capture/torchrun/launch.py" if sample.launcher == "torchrun" else "exitrec.py around each rank")
                  + "). The logs were not read."),
        "notes": " ".join(n for n in notes if n),
        "description": f"{STACK_NAMES[sample.stack]} under {sample.launcher}, {sample.nranks} ranks: {scenario.description}",
        "injected": injected,
        "injected_ranks": sorted(r["rank"] for r in records),
        "exit_codes": outcome["exit_codes"],
        "exit_order": exit_order(outcome),
        **{k: outcome[k] for k in ("signalled_by_agent", "signals_forwarded", "job_id") if k in outcome},
        "launcher_exit_code": rc,
        "debug_env": {k: env[k] for k in sorted(env) if k.startswith("TORCH_")},
        "versions": versions(),
        "run_seconds": round(elapsed, 1),
        "command": " ".join(command).replace(str(REPO) + "/", "").replace(PYTHON, "python"),
    }
    if rc == -999:
        problems.append(f"the launcher ran past {RUN_TIMEOUT_SECONDS} s and was killed")
    if problems:
        expected["capture_problems"] = problems
    return expected, problems


def scrub(logs: Path) -> None:
    """Paths of this machine's temp dirs are fine; make sure no secret-looking env var reached the logs."""
    for path in logs.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".out", ".txt"):
            text = path.read_text(errors="replace")
            if re.search(r"(TOKEN|SECRET|PASSWORD|API_KEY)=\S", text):
                print(f"WARNING: secret-looking text in {path}", file=sys.stderr)


def capture(sample: Sample, root: Path) -> dict:
    out = root / sample.name
    shutil.rmtree(out, ignore_errors=True)
    logs = out / "logs"
    logs.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="capture-truth-") as truth:
        truth_dir = Path(truth)
        os.chmod(truth_dir, 0o777)
        env = run_env(sample, logs, truth_dir)
        started = time.monotonic()
        command, rc, outcome = LAUNCHERS[sample.launcher](sample, logs, env)
        expected, problems = build_expected(sample, command, env, truth_dir, time.monotonic() - started, rc, outcome)
    scrub(logs)
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    if problems:
        print(f"  PROBLEM {sample.name}: {'; '.join(problems)}", flush=True)
    return expected


def resettle_sacct(root: Path) -> None:
    """Re-query sacct for every srun sample (after `scontrol shutdown slurmctld` + restart, the final records)."""
    for exp_path in sorted(root.glob("*-srun-*/expected.json")):
        expected = json.loads(exp_path.read_text())
        if "job_id" in expected:
            write_sacct(expected["job_id"], exp_path.parent / "logs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="sample names to capture; default all")
    parser.add_argument("--launcher", nargs="*", choices=sorted(LAUNCHERS), help="only these launchers")
    parser.add_argument("--list", action="store_true", help="print the sample names and exit")
    parser.add_argument("--resettle", action="store_true", help="only re-query sacct into the srun samples' sacct.txt")
    parser.add_argument("--out", type=Path, default=SAMPLES, help="where the sample directories go (default samples/)")
    args = parser.parse_args()
    if args.list:
        for s in SAMPLE_LIST:
            print(s.name)
        return
    if args.resettle:
        resettle_sacct(args.out.resolve())
        return
    unknown = set(args.only or ()) - {s.name for s in SAMPLE_LIST}
    if unknown:
        sys.exit(f"unknown sample(s): {', '.join(sorted(unknown))}")
    chosen = [s for s in SAMPLE_LIST if (not args.only or s.name in args.only)
              and (not args.launcher or s.launcher in args.launcher)]
    for sample in chosen:
        expected = capture(sample, args.out.resolve())
        print(f"{sample.name}: {expected['kind']} {expected['culprit_ranks']} div={expected['divergence']} "
              f"{expected['run_seconds']} s, exit codes {expected['exit_codes']}, rc {expected['launcher_exit_code']}", flush=True)


if __name__ == "__main__":
    main()
