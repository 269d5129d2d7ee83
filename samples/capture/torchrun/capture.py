"""Run every torchrun scenario of train.py and write samples/tr-*/{logs/,expected.json}.

Usage (from the repository root): /work/torchenv/bin/python samples/capture/torchrun/capture.py [--only NAME ...]

expected.json is built from what the run itself reported: the scenario definition, the fault the
injected rank wrote to a truth directory outside logs/ (its step and the SeqNum of the collective
it diverged at), and each worker's exit code as seen by launch.py. The logs are never read here.
"""

import argparse
import json
import os
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
TRAIN = HERE / "train.py"
TRAIN_PRINTS = HERE / "train_prints.py"  # print()-and-tqdm reporting, for the print/progress rules
LAUNCH = HERE / "launch.py"
RUN_TIMEOUT_SECONDS = 180

DETAIL_ENV = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"}
FR_BUFFER_ENTRIES = "2000"
# DDP construction over the DETAIL wrapper PG segfaults on torch 2.13 CPU (see train.py HandWrittenDataParallel)
NO_DDP = ("--no-ddp",)
NO_DDP_NOTE = ("Gradients are averaged by a hand-written flat all_reduce instead of DDP: with TORCH_DISTRIBUTED_DEBUG=DETAIL, "
               "DDP construction dies with SIGSEGV on torch 2.13 CPU/gloo. ")


@dataclass(frozen=True)
class Scenario:
    scenario: str
    kind: str
    # who the culprit is, given the world size and the injected rank
    culprits: str = "fault"  # "fault" | "rank0" | "none"
    divergence_known: bool = True
    description: str = ""
    note: str = ""  # how the real run differed from the design, or what makes it hard


SCENARIOS = {
    "healthy": Scenario("healthy", "healthy", "none", False, "8 DDP steps, no fault"),
    "ddp_param_mismatch": Scenario(
        "ddp_param_mismatch", "collective_mismatch", description="the injected rank builds the model with one extra Linear layer",
        note="Every rank raises in the DDP constructor before any step; divergence.seq is the first collective of the job (DDP's parameter-shape check)."),
    "missing_collective": Scenario(
        "missing_collective", "missing_collective", description="the injected rank skips the metrics all_reduce at the fault step",
        note="No abort on gloo: the culprit's next collective (BROADCAST numel 1) and the others' ALLREDUCE (numel 2) wait on each other until the 20 s timeout; the culprit times out too."),
    "rank0_only_collective": Scenario(
        "rank0_only_collective", "missing_collective", "rank0",
        description="rank 0 calls dist.barrier() inside its checkpoint branch after the fault step",
        note="Rank 0's BARRIER waits against the others' next gradient ALLREDUCE until the timeout. Culprit = rank 0 by the minority convention."),
    "uneven_inputs": Scenario(
        "uneven_inputs", "rank_exited_early", description="the injected rank has fault_step-1 batches, finishes and exits 0",
        note="The culprit exits 0 and torchrun never lists it; the others fail with Connection closed by peer."),
    "crash_exception": Scenario(
        "crash_exception", "rank_crashed", description="the injected rank raises RuntimeError before the fault step's forward"),
    "crash_sigkill": Scenario(
        "crash_sigkill", "rank_crashed", description="the injected rank SIGKILLs itself at the fault step (as the OOM killer would)",
        note="Exit -9 with no traceback and no error.json, as an OOM kill looks to torchrun."),
    "silent_exit": Scenario(
        "silent_exit", "rank_crashed", description="the injected rank calls os._exit(1) at the fault step, printing nothing",
        note="Exit 1 with no traceback and no error.json: the others lose their peer; only torchrun's failure line says which rank."),
    "stalled_rank": Scenario(
        "stalled_rank", "rank_stalled", description="the injected rank sleeps 120 s in data loading at the fault step",
        note="The others time out after 20 s while the culprit still sleeps; the agent SIGTERMs it (-15), so it leaves no traceback."),
    "op_order_mismatch": Scenario(
        "op_order_mismatch", "collective_mismatch",
        description="at the fault step the injected rank broadcasts the stop flag before the metrics all_reduce",
        note="BROADCAST against ALLREDUCE at the same seq hangs until the timeout on gloo; no rank reports a mismatch without DETAIL."),
    "shape_mismatch": Scenario(
        "shape_mismatch", "collective_mismatch", description="from the fault step the injected rank all_reduces 3 metrics instead of 2",
        note="No size-mismatch abort on gloo: the 3- and 2-element ALLREDUCEs hang until the timeout."),
    "straggler": Scenario(
        "straggler", "straggler", divergence_known=False, description="the injected rank sleeps 0.3 s extra per step (3x the others' compute)",
        note="No failure. DDP keeps all ranks in lockstep, so step timestamps are equal; only data_time in the step line shows the slow rank."),
    "bn_eval_desync": Scenario(
        "bn_eval_desync", "missing_collective",
        description="model with BatchNorm; at the fault step the injected rank runs an extra forward through the DDP wrapper "
        "(validation with grad enabled), which broadcasts the BN buffers on that rank only",
        note="The meaningful CPU variant of inconsistent model state: the extra BROADCAST (divergence.seq) shifts all later "
        "collectives of that rank by one and the job hangs until the timeout. A rank merely left in eval() issues the same "
        "collectives (DDP broadcasts buffers whatever module.training is) and diverges only in its numbers, which no log shows."),
    "lone_health_check": Scenario(
        "lone_health_check", "missing_collective",
        description="at the fault step the injected rank alone runs dist.monitored_barrier(timeout=5 s) as a peer health "
        "check, catches its timeout, logs a warning and goes on",
        note="gloo's monitored_barrier takes collective tags (the Flight Recorder's collective_seq_id) without recording an "
        "entry or bumping the PG sequence number, so the injected rank's later collectives carry other tags than the "
        "others': its next collective and theirs (both the gradient ALLREDUCE) never meet and every rank times out. "
        "divergence.seq is the others' collective there, a seq the injected rank's dump skips."),
    "alltoall_split_mismatch": Scenario(
        "alltoall_split_mismatch", "collective_mismatch",
        description="every step starts with an uneven all_to_all_single (rank r sends r+1 elements to each rank); at the "
        "fault step the injected rank's receive split for the next rank is one too large",
        note="gloo accepts a receive that gets fewer bytes than its buffer: nothing fails, every rank exits 0, the injected "
        "rank's output holds one uninitialised element. The elements sent over all ranks are not the elements received "
        "at divergence.seq."),
    "async_extra_broadcast": Scenario(
        "async_extra_broadcast", "missing_collective",
        description="after the fault step the injected rank alone issues dist.broadcast(stop, src=itself, async_op=True), "
        "never waited, and goes on into the next step",
        note="The extra broadcast and the next gradient ALLREDUCE (one seq later on the injected rank than on the others) "
        "wait until the timeout. A collective issued by one rank only: culprit by the minority convention."),
    "error_after_end": Scenario(
        "error_after_end", "healthy", "none", False,
        description="every rank trains 8 steps and logs 'training finished'; then, after the final barrier, the "
        "injected rank logs an ERROR that uploading the run's metrics failed (a refused connection)",
        note="Every rank exits 0: the error line is shutdown noise after the run ended well, not a failure."),
    "unmatched_send": Scenario(
        "unmatched_send", "missing_collective",
        description="after the fault step's metrics sync the injected rank sends its step loss to another rank with "
        "dist.isend (a per-rank loss report switched on on that host only), never waited; no rank posts the recv",
        note="The send takes a SeqNum on the default PG, but DETAIL fingerprints collectives only: at the next "
        "collective every rank raises 'Detected mismatch between collectives', the fingerprints equal but for "
        "SequenceNumber. divergence.seq is the send's SeqNum, where the others issued their next gradient ALLREDUCE."),
    "join_check_stall": Scenario(
        "join_check_stall", "rank_stalled", divergence_known=False,
        description="before each step every rank runs gloo's monitored_barrier (10 s) as a join check; at the fault "
        "step the injected rank 0, which runs that barrier, sleeps 120 s in data loading first. Only the other "
        "ranks' logs are kept (the per-rank files of ranks 1-3, not the console that tees rank 0), as when the "
        "node of rank 0 was lost",
        note="Ranks 1-3 fail with 'successfully reached monitoredBarrier, but received errors while waiting for "
        "send/recv from rank 0' and exit 1; the agent SIGTERMs rank 0. monitored_barrier takes no SeqNum: no "
        "divergence."),
    # train_prints.py: plain `Rank r: ...` prints and a tqdm bar per rank instead of the logging module
    "stall_before_ddp": Scenario(
        "stall_before_ddp", "rank_stalled", divergence_known=False,
        description="the injected rank blocks reading its pretrained weights (a 120 s sleep) after printing "
        "'moving model', while the others print 'wrapping model in DistributedDataParallel' and wait in DDP's first "
        "collective; after 8 s the user presses Ctrl-C (SIGINT to the torchrun agent)",
        note="No rank times out (the 20 s gloo timeout comes later than the Ctrl-C): the agent forwards SIGINT to every "
        "worker. The culprit never issued a collective; injected.seq is the one the others wait in."),
    "uneven_shards_val": Scenario(
        "uneven_shards_val", "rank_exited_early",
        description="15 training shards dealt round-robin over 4 ranks: the last rank has 9 batches, the others 12; "
        "with gradient accumulation (DDP no_sync every other batch) it finishes its epoch, validates and all_reduces "
        "its validation totals on a separate metrics process group while the others are still in their gradient "
        "all-reduces",
        note="The short rank's last gradient ALLREDUCE (its batch 9, synced as the epoch's last) meets the others' "
        "batch 10; then it waits on the metrics group, they in their batch-12 gradient ALLREDUCE on the default "
        "group (divergence.seq), and every rank times out after 20 s. Each rank's tqdm bar shows how far it got. "
        "(With the validation all_reduce on the default group, gloo aborts the short rank instead, SIGABRT on "
        "'op.preamble.length <= op.nbytes': a crash, not this case.)"),
    "uneven_shards_health": Scenario(
        "uneven_shards_health", "rank_exited_early", divergence_known=False,
        description="the same 15 shards over 4 ranks (the last rank 9 batches, the others 12), with a "
        "dist.monitored_barrier health check (10 s) before every synchronised step: the last rank finishes its "
        "epoch, prints that its training finished and waits for the others in a final dist.barrier()",
        note="Rank 0's next health check times out naming the last rank (`failed to pass monitoredBarrier`); the "
        "others then lose rank 0. monitored_barrier takes no SeqNum: no divergence."),
    "rank0_eval_gather": Scenario(
        "rank0_eval_gather", "collective_mismatch", "rank0",
        description="at the fault step rank 0 alone runs an evaluation that all_gathers its predictions (as a "
        "main-process-only evaluation does) before the step's forward; the other rank goes on into the step's "
        "gradient all_reduce",
        note="Two ranks: each side of the mismatch is one rank. DETAIL's check names the mismatch on both (ALLGATHER "
        "against ALLREDUCE at the same SequenceNumber); rank 0 is the culprit, the main process that left the "
        "step's path."),
    "oom_skip_batch": Scenario(
        "oom_skip_batch", "missing_collective",
        description="at the fault step the injected rank's step fails to allocate its memory (a real 64 TiB "
        "allocation, refused by the CPU allocator); it catches the error, logs a warning and skips the batch, "
        "as OOM-recovery code does, while the others run the step",
        note="The skipped step issues none of its collectives on the injected rank: its next gradient ALLREDUCE "
        "meets the others' metrics ALLREDUCE of the fault step. divergence.seq is the first collective it skipped."),
}


@dataclass(frozen=True)
class Sample:
    scenario: str
    nranks: int
    fault_rank: int
    record: bool = False
    detail: bool = False
    flight_recorder: bool = False
    timeout: float = 20.0
    extra_args: tuple = ()
    notes: str = ""
    env: dict = field(default_factory=dict)
    script: Path = TRAIN
    interrupt_after: float | None = None  # seconds after the fault to send SIGINT to the agent (a Ctrl-C)
    collected: tuple = ()  # where set, only these ranks' log files are kept (the others' nodes were lost)

    @property
    def name(self) -> str:
        suffix = "-detail" if self.detail else "-fr" if self.flight_recorder else ""
        return f"tr-{self.scenario}-{self.nranks}{suffix}"


SAMPLE_LIST = [
    Sample("healthy", 4, 1),
    Sample("healthy", 8, 5),
    Sample("healthy", 4, 1, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("ddp_param_mismatch", 4, 3, record=True),
    Sample("ddp_param_mismatch", 8, 6, record=True),
    Sample("ddp_param_mismatch", 4, 3, detail=True),
    Sample("missing_collective", 4, 2, record=True),
    Sample("missing_collective", 8, 5),
    Sample("missing_collective", 4, 2, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("missing_collective", 4, 2, flight_recorder=True, record=True),
    Sample("rank0_only_collective", 4, 0),
    Sample("rank0_only_collective", 8, 0, record=True),
    Sample("rank0_only_collective", 4, 0, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("uneven_inputs", 4, 3),
    Sample("uneven_inputs", 8, 2, record=True),
    Sample("uneven_inputs", 4, 3, flight_recorder=True, record=True),
    Sample("crash_exception", 4, 1, record=True),
    Sample("crash_exception", 8, 6),
    Sample("crash_exception", 4, 1, detail=True, record=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("crash_sigkill", 4, 2),
    Sample("crash_sigkill", 8, 3, record=True),
    Sample("stalled_rank", 4, 2, record=True),
    Sample("stalled_rank", 8, 7),
    Sample("stalled_rank", 4, 2, flight_recorder=True, record=True),
    Sample("stalled_rank", 4, 2, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("op_order_mismatch", 4, 1),
    Sample("op_order_mismatch", 4, 1, detail=True, record=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("op_order_mismatch", 4, 1, flight_recorder=True, record=True),
    Sample("shape_mismatch", 4, 3, record=True),
    Sample("shape_mismatch", 8, 4),
    Sample("shape_mismatch", 4, 3, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("straggler", 4, 2),
    Sample("straggler", 8, 6),
    Sample("straggler", 4, 2, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    Sample("bn_eval_desync", 4, 1),
    Sample("silent_exit", 4, 2),
    # Flight Recorder rules that need a tie (two ranks) or a fault the DDP steps alone do not have
    Sample("shape_mismatch", 2, 1, flight_recorder=True, record=True),
    # ... and a majority: three ranks' dumps agree at the seq where the fourth's size differs
    Sample("shape_mismatch", 4, 3, flight_recorder=True, record=True),
    Sample("op_order_mismatch", 2, 1, flight_recorder=True, record=True),
    Sample("lone_health_check", 4, 2, flight_recorder=True, record=True),
    Sample("alltoall_split_mismatch", 4, 2, flight_recorder=True, record=True),
    Sample("async_extra_broadcast", 4, 0, flight_recorder=True, record=True),
    # train_prints.py: rules that read plain prints (print_order.sql) and progress bars (uneven_totals.sql)
    Sample("stall_before_ddp", 4, 2, timeout=60.0, script=TRAIN_PRINTS, interrupt_after=8.0),
    Sample("uneven_shards_val", 4, 3, script=TRAIN_PRINTS),
    # the runtime names the short rank, which had said its training finished (laggards_had_finished)
    Sample("uneven_shards_health", 4, 3, script=TRAIN_PRINTS),
    # shutdown noise after a run that ended well (errors_after_the_end)
    Sample("error_after_end", 4, 2),
    # DETAIL's fingerprints apart in SequenceNumber alone (runtime_named_sequence_apart)
    Sample("unmatched_send", 4, 2, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    # the monitored barrier's rank 0 silent, and its log not collected (barrier_peer_log_missing)
    Sample("join_check_stall", 4, 0, extra_args=("--health-timeout", "10"), collected=(1, 2, 3)),
    # two ranks split between two ops, the main process alone on its side (main_process_side_path)
    Sample("rank0_eval_gather", 2, 0, detail=True, extra_args=NO_DDP, notes=NO_DDP_NOTE),
    # a caught out-of-memory error, the batch skipped on one rank only (caught_oom_out_of_step)
    Sample("oom_skip_batch", 4, 2),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_env(sample: Sample, logs: Path, truth_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL_"))}
    env["CAPTURE_TRUTH_DIR"] = str(truth_dir)
    env["PYTHONUNBUFFERED"] = "1"
    if sample.detail:
        env.update(DETAIL_ENV)
    if sample.flight_recorder:
        (logs / "flight_recorder").mkdir()
        env["TORCH_FR_BUFFER_SIZE"] = FR_BUFFER_ENTRIES
        env["TORCH_FR_DUMP_TEMP_FILE"] = str(logs / "flight_recorder" / "fr_trace_rank_")
    env.update(sample.env)
    return env


def torchrun_command(sample: Sample, logs: Path) -> list[str]:
    return [
        sys.executable, str(LAUNCH),
        "--nproc-per-node", str(sample.nranks),
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        "--log-dir", str(logs / "torchrun"), "--redirects", "3", "--tee", "3",
        str(sample.script), "--scenario", sample.scenario, "--fault-rank", str(sample.fault_rank),
        "--timeout", str(sample.timeout), *(["--record"] if sample.record else []), *sample.extra_args,
    ]


def culprit_ranks(sample: Sample, scenario: Scenario) -> list[int]:
    return {"fault": [sample.fault_rank], "rank0": [0], "none": []}[scenario.culprits]


def exit_order(workers: dict) -> list[dict]:
    """Ranks in the order their processes ended (observed by launch.py every 50 ms), relative seconds."""
    seen = sorted((w["exit_seen_at"], int(rank)) for rank, w in workers.items() if w.get("exit_seen_at"))
    if not seen:
        return []
    first = seen[0][0]
    return [{"rank": rank, "after_s": round(at - first, 2), "exit_code": workers[str(rank)]["exit_code"]} for at, rank in seen]


def build_expected(sample: Sample, command: list[str], env: dict, truth_dir: Path, elapsed: float, launcher_rc: int) -> dict:
    scenario = SCENARIOS[sample.scenario]
    workers = json.loads((truth_dir / "workers.json").read_text())
    faults = [json.loads(p.read_text()) for p in sorted(truth_dir.glob("fault_rank*.json"))]
    injected = faults[0] if faults else None
    divergence = None
    if scenario.divergence_known and injected:
        divergence = {"pg": "0", "seq": injected["seq"]}
    exit_codes = {rank: w["exit_code"] for rank, w in sorted(workers.items(), key=lambda kv: int(kv[0]))}
    return {
        "scenario": sample.scenario,
        "kind": scenario.kind,
        "culprit_ranks": culprit_ranks(sample, scenario),
        "world_size": sample.nranks,
        "divergence": divergence,
        "launcher": "torchrun",
        "truth": (
            "Fault injected by train.py on the named rank (it recorded its step and the 1-based SeqNum of the "
            "collective it diverged at, from ProcessGroup._get_sequence_number_for_group, outside logs/); "
            "exit codes recorded by launch.py from the worker processes."
        ),
        "notes": " ".join(filter(None, [scenario.note, sample.notes])),
        "description": scenario.description,
        "injected": injected,
        "exit_codes": exit_codes,
        "signalled_by_agent": sorted(int(r) for r, w in workers.items() if w["signalled_by_agent"]),
        "exit_order": exit_order(workers),
        "worker_pids": {rank: w["pid"] for rank, w in workers.items()},
        "launcher_exit_code": launcher_rc,
        "record_decorator": sample.record,
        "debug_env": {k: env[k] for k in sorted(env) if k.startswith("TORCH_")},
        "run_seconds": round(elapsed, 1),
        "command": " ".join(["torchrun", *command[2:]]).replace(str(SAMPLES.parent) + "/", ""),
    }


def interrupt_when_hung(proc: subprocess.Popen, truth_dir: Path, seconds: float) -> None:
    """Ctrl-C: SIGINT to the agent `seconds` after the fault rank recorded its fault (the job hangs from there)."""
    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    while not any(truth_dir.glob("fault_rank*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)


def keep_only_collected(logs: Path, ranks: tuple) -> None:
    """Leave only the per-rank files of `ranks` (torchrun/<run>/attempt_N/<local rank>/): the console
    tees every rank and holds the agent's summary of all of them, so it goes too."""
    (logs / "console.log").unlink()
    for rank_dir in logs.glob("torchrun/*/attempt_*/*"):
        if rank_dir.is_dir() and int(rank_dir.name) not in ranks:
            shutil.rmtree(rank_dir)


def capture(sample: Sample, root: Path = SAMPLES) -> dict:
    out = root / sample.name
    shutil.rmtree(out, ignore_errors=True)
    logs = out / "logs"
    logs.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="capture-truth-") as truth:
        truth_dir = Path(truth)
        env = run_env(sample, logs, truth_dir)
        command = torchrun_command(sample, logs)
        started = time.monotonic()
        with open(logs / "console.log", "w") as console:
            proc = subprocess.Popen(command, env=env, stdout=console, stderr=subprocess.STDOUT)
            if sample.interrupt_after is not None:
                interrupt_when_hung(proc, truth_dir, sample.interrupt_after)
            proc.wait(timeout=RUN_TIMEOUT_SECONDS)
        expected = build_expected(sample, command, env, truth_dir, time.monotonic() - started, proc.returncode)
    if sample.collected:
        keep_only_collected(logs, sample.collected)
        expected["collected_ranks"] = list(sample.collected)
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    return expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="sample names (tr-...) to capture; default all")
    parser.add_argument("--out", type=Path, default=SAMPLES,
                        help="where the sample directories go (default samples/); another directory leaves the "
                             "bundled samples alone, e.g. to check a fresh capture: CORRELATOR_SAMPLES=DIR pytest tests/test_accuracy.py")
    args = parser.parse_args()
    chosen = [s for s in SAMPLE_LIST if not args.only or s.name in args.only]
    unknown = set(args.only or ()) - {s.name for s in SAMPLE_LIST}
    if unknown:
        sys.exit(f"unknown sample(s): {', '.join(sorted(unknown))}")
    for sample in chosen:
        expected = capture(sample, args.out.resolve())
        print(f"{sample.name}: {expected['run_seconds']} s, exit codes {expected['exit_codes']}, "
              f"launcher rc {expected['launcher_exit_code']}", flush=True)


if __name__ == "__main__":
    main()
