"""What every stack workload shares: identity from the launcher, logging, the injected fault, the truth record.

Each workload (hf_trainer.py, accel.py, lightning_ddp.py, ddp.py, fsdp.py) trains a tiny model with its
stack and calls the hooks below at the same points of every step:

  fault.data(step)            while fetching the step's batch (stall, straggler)
  fault.before_forward(step)  before the forward (crash, SIGKILL, segfault, OOM, local eval + crash)
  fault.sync_metrics(step, loss)  the app's own per-step collectives: ALLREDUCE of [loss_sum, samples]
                              (numel 2), then BROADCAST of a stop flag from rank 0 (numel 1)
                              (skipped, swapped or resized on the fault rank)
  fault.after_step(step)      after the step's log line (rank-0-only barrier in a checkpoint branch,
                              an evaluation all_gather whose input shape every rank prints first)
  fault.after_training()      after the final barrier, before destroy_process_group (a rank-0-only
                              barrier in the final-checkpoint branch: the others exit 0)
  fault.num_batches(steps)    how many batches this rank has (uneven inputs: fewer on the fault rank)

The injected rank writes what it did (step, the 1-based SeqNum of the next collective on the default
PG, i.e. the one where it leaves the common path) to $CAPTURE_TRUTH_DIR/fault_rank<R>.json, outside
the log directory. Nothing logged names the fault.
"""

import ctypes
import json
import logging
import os
import signal
import socket
import sys
import time

SCENARIOS = (
    "healthy", "straggler", "stalled_rank", "crash_exception", "segfault_all", "crash_sigkill",
    "missing_collective", "rank0_only_collective", "op_order_mismatch", "shape_mismatch",
    "uneven_inputs", "oom", "srun_wait",
    "op_order_pair", "after_loop_barrier", "gather_shape_mismatch", "missing_ranks", "missing_ranks_cancelled",
    "bad_master_addr",  # no hook: the capture gives every rank a MASTER_ADDR that does not resolve
    "error_all", "rank0_eval_broadcast", "oom_before_init",
)
STRAGGLE_SECONDS = 0.3
STALL_SECONDS = 120.0
RANK0_EVAL_SECONDS = 60.0
EVAL_SAMPLES = 16
LOCAL_EVAL_SECONDS = 12.0
TIMEOUT_SECONDS = 20


def add_fault_args(parser) -> None:
    parser.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=TIMEOUT_SECONDS, help="process-group timeout, seconds")


def identity(set_env: bool = True) -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from torchrun, OpenMPI or SLURM; exported as RANK/WORLD_SIZE/LOCAL_RANK (env:// init)."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"]))
    elif "OMPI_COMM_WORLD_RANK" in env:
        # a job script's own `export WORLD_SIZE=N` (the size it was written for) wins over mpirun's -np
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env.get("WORLD_SIZE", env["OMPI_COMM_WORLD_SIZE"]))
        local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    elif "SLURM_PROCID" in env:
        rank, world, local = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", 0))
    else:
        rank, world, local = 0, 1, 0
    if set_env:
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", "29500")
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local))
    return rank, world, local


def hostname() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def setup_logging(name: str, fmt: str) -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


def next_seq() -> int:
    """1-based SeqNum of the next collective on the default PG (as Flight Recorder numbers them)."""
    import torch.distributed as dist

    return dist.group.WORLD._get_sequence_number_for_group() + 1


def dump_flight_recorder(rank: int, log: logging.Logger) -> None:
    """gloo has no watchdog that dumps on timeout: write the Flight Recorder buffer from the script."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not prefix or not int(os.environ.get("TORCH_FR_BUFFER_SIZE", "0")):
        return
    from torch._C._distributed_c10d import _dump_fr_trace

    path = f"{prefix}{rank}"
    with open(path, "wb") as f:
        f.write(_dump_fr_trace())
    log.error("wrote Flight Recorder dump to %s", path)


class Fault:
    def __init__(self, args, rank: int, world_size: int, log: logging.Logger,
                 all_reduce=None, broadcast=None, barrier=None):
        import torch.distributed as dist

        self.scenario, self.fault_rank, self.fault_step = args.scenario, args.fault_rank, args.fault_step
        self.rank, self.world_size, self.log = rank, world_size, log
        self.all_reduce = all_reduce or dist.all_reduce
        self.broadcast = broadcast or (lambda t, src: dist.broadcast(t, src))
        self.barrier = barrier or dist.barrier
        self.on_fault_rank = rank == self.fault_rank

    def truth(self, step: int, action: str, seq: int | None = None) -> None:
        truth_dir = os.environ.get("CAPTURE_TRUTH_DIR")
        if not truth_dir:
            return
        facts = {"rank": self.rank, "host": hostname(), "scenario": self.scenario, "step": step,
                 "seq": next_seq() if seq is None else seq, "action": action, "time": time.time()}
        with open(os.path.join(truth_dir, f"fault_rank{self.rank}.json"), "w") as f:
            json.dump(facts, f)

    def is_fault(self, scenario: str, step: int) -> bool:
        return self.scenario == scenario and self.on_fault_rank and step == self.fault_step

    def num_batches(self, steps: int) -> int:
        if self.scenario == "uneven_inputs" and self.on_fault_rank:
            return self.fault_step - 1  # this rank's shard is shorter
        return steps

    def left_early(self, batches_done: int) -> None:
        """Called by the workload when its loop ended; the uneven rank records where it left."""
        if self.scenario == "uneven_inputs" and self.on_fault_rank:
            self.truth(batches_done, "left after its last batch")

    def data(self, step: int) -> None:
        if self.is_fault("stalled_rank", step):
            self.truth(step, "stalled in data loading")
            self.log.info("reading shard /data/train-%05d.tar", self.rank)
            time.sleep(STALL_SECONDS)  # a hung NFS read / deadlocked dataloader worker
        if self.scenario == "straggler" and self.on_fault_rank:
            time.sleep(STRAGGLE_SECONDS)

    def before_forward(self, step: int) -> None:
        if step != self.fault_step:
            return
        if self.is_fault("crash_exception", step):
            self.truth(step, "raised RuntimeError")
            raise RuntimeError(f"corrupt record in /data/train-{self.rank:05d}.tar at offset 81920")
        if self.is_fault("crash_sigkill", step):
            self.truth(step, "SIGKILL to self")
            os.kill(os.getpid(), signal.SIGKILL)
        if self.scenario == "segfault_all":  # common mode: every rank hits the same bad native call
            self.truth(step, "read address 0 (SIGSEGV), every rank")
            ctypes.string_at(0)
        if self.is_fault("oom", step):
            import torch

            self.truth(step, "allocates 100 MB every 0.2 s until killed")
            hoard = []
            while True:
                hoard.append(torch.ones(25 * 1024 * 1024))  # 100 MB, touched so it is resident
                time.sleep(0.2)
        if self.scenario == "srun_wait":  # every rank runs a local evaluation (no collectives)
            self.log.info("running local evaluation")
            if self.on_fault_rank:
                self.truth(step, "raised RuntimeError in local evaluation")
                raise RuntimeError(f"eval shard /data/val-{self.rank:05d}.tar: truncated file")
            time.sleep(LOCAL_EVAL_SECONDS)

    def sync_metrics(self, step: int, loss: float, samples: int):
        import torch

        metrics = torch.tensor([loss * samples, float(samples)])
        stop = torch.zeros(1)
        faulty = self.on_fault_rank and step >= self.fault_step
        if self.scenario == "shape_mismatch" and faulty:
            if step == self.fault_step:
                self.truth(step, "all_reduce of numel 3 instead of 2")
            metrics = torch.cat([metrics, torch.tensor([float(step)])])
        if self.is_fault("missing_collective", step):
            self.truth(step, "skipped metrics all_reduce")
            self.broadcast(stop, 0)
            return metrics
        if self.is_fault("op_order_mismatch", step) or self.is_fault("op_order_pair", step):
            self.truth(step, "broadcast before all_reduce")
            self.broadcast(stop, 0)
            metrics = self._reduce(metrics)
            return metrics
        metrics = self._reduce(metrics)
        if self.is_fault("rank0_eval_broadcast", step):  # rank 0 decides the stop flag after a validation only it runs
            self.truth(step, "rank-0-only validation before the stop-flag broadcast it roots")
            self.log.info("running validation before the early-stopping decision")
            time.sleep(RANK0_EVAL_SECONDS)
        self.broadcast(stop, 0)
        return metrics

    def _reduce(self, tensor):
        out = self.all_reduce(tensor)
        return tensor if out is None or not hasattr(out, "shape") else out

    def after_step(self, step: int) -> None:
        """The classic bug: a barrier inside an `if rank == 0:` checkpoint branch."""
        if self.scenario == "rank0_only_collective" and self.rank == 0 and step == self.fault_step:
            self.truth(step, "barrier only on rank 0")
            self.log.info("saving checkpoint for step %d", step)
            self.barrier()
        if self.scenario == "gather_shape_mismatch" and step == self.fault_step:
            self.gather_predictions(step)

    def gather_predictions(self, step: int) -> None:
        """Every rank all_gathers its evaluation predictions, printing their shape first; the fault
        rank's evaluation shard is one sample short (an uneven last shard, no padding)."""
        import torch
        import torch.distributed as dist

        samples = EVAL_SAMPLES - 1 if self.on_fault_rank else EVAL_SAMPLES
        if self.on_fault_rank:
            self.truth(step, f"all_gather of a [{samples}, 4] tensor, the others [{EVAL_SAMPLES}, 4]")
        preds = torch.randn(samples, 4)
        self.log.info("gathering eval predictions: shape=%s", list(preds.shape))
        gathered = [torch.empty_like(preds) for _ in range(self.world_size)]
        dist.all_gather(gathered, preds)
        self.log.info("gathered %d prediction tensors", len(gathered))

    def after_training(self) -> None:
        """After the loop and the final barrier: rank 0 alone saves the final checkpoint and, as
        a checkpoint helper written for every rank would, waits in a barrier the others never enter."""
        if self.scenario == "after_loop_barrier" and self.rank == 0:
            self.truth(-1, "barrier only on rank 0 after training (final checkpoint)")
            self.log.info("saving final checkpoint")
            self.barrier()
            self.log.info("final checkpoint saved")

    def before_init(self) -> None:
        """Before init_process_group: the ranks a launcher started for a world it did not match."""
        if self.scenario == "error_all":  # common mode: every rank reads the same missing file
            self.truth(0, "raised FileNotFoundError before init_process_group, every rank", seq=0)
            raise FileNotFoundError(2, "No such file or directory", "/data/shards/index.json")
        if self.scenario == "oom_before_init" and self.on_fault_rank:
            # a buffer sized from a per-host cache whose token count is corrupt: 2**40 floats, 4 TiB
            import torch

            self.truth(0, "allocated a 4 TiB buffer before init_process_group (DefaultCPUAllocator fails)", seq=0)
            torch.empty(2 ** 40)
        if self.scenario in ("missing_ranks", "missing_ranks_cancelled") and self.rank == 0:
            launched = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("SLURM_NTASKS") or self.world_size)
            self.truth(0, f"init_process_group for world_size={self.world_size} with {launched} processes started", seq=0)
