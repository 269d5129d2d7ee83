"""A small DDP training job on gloo/CPU that injects one distributed-training fault.

Run under torchrun; the scenario is chosen with --scenario. The injected rank writes what it did
(step, PG sequence number of the collective where it diverged) to $CAPTURE_TRUTH_DIR, outside
the log directory, so that capture.py records the truth from the run and not from the logs.

Per step every rank issues, in this order on the default PG:
  1. ALLREDUCE of the gradient bucket (DDP, during backward)
  2. ALLREDUCE of the metrics tensor [loss_sum, samples] (numel 2)
  3. BROADCAST of the stop flag from rank 0 (numel 1)
"""

import argparse
import json
import logging
import os
import signal
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel

SCENARIOS = (
    "healthy", "ddp_param_mismatch", "missing_collective", "rank0_only_collective",
    "uneven_inputs", "crash_exception", "crash_sigkill", "stalled_rank", "op_order_mismatch",
    "shape_mismatch", "straggler", "bn_eval_desync", "silent_exit", "lone_health_check",
    "alltoall_split_mismatch", "async_extra_broadcast", "error_after_end", "unmatched_send",
    "join_check_stall", "rank0_eval_gather", "oom_skip_batch",
)
COMPUTE_SECONDS = 0.15  # simulated per-step compute, so a straggler is visible in the timings

log = logging.getLogger("train")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=20.0, help="process-group timeout, seconds")
    parser.add_argument("--stall-seconds", type=float, default=120.0)
    parser.add_argument("--health-timeout", type=float, default=5.0, help="lone_health_check: monitored_barrier timeout, s")
    parser.add_argument("--record", action="store_true", help="wrap the entry in elastic's @record")
    parser.add_argument("--no-ddp", action="store_true", help="average gradients by hand instead of DDP")
    return parser.parse_args()


def setup_logging(rank: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [rank {rank}] %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


class Classifier(nn.Module):
    def __init__(self, extra_layer: bool = False, batchnorm: bool = False):
        super().__init__()
        layers = [nn.Linear(32, 64)]
        if batchnorm:
            layers.append(nn.BatchNorm1d(64))
        layers += [nn.ReLU(), nn.Linear(64, 64), nn.ReLU()]
        if extra_layer:  # e.g. a config flag read differently on one host
            layers += [nn.Linear(64, 64), nn.ReLU()]
        layers.append(nn.Linear(64, 4))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class HandWrittenDataParallel(nn.Module):
    """Data parallelism without DDP: one flat gradient all_reduce per step, like a single DDP bucket.

    Needed for TORCH_DISTRIBUTED_DEBUG=DETAIL runs: on torch 2.13 CPU, constructing DDP over the
    DETAIL wrapper process group dies with SIGSEGV (in DDP's Logger.set_construction_data_and_log).
    """

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
        dist.broadcast(flat, src=0)
        self._unflatten_into(flat, [p.data for p in module.parameters()])

    def forward(self, x):
        return self.module(x)

    def average_gradients(self) -> None:
        grads = [p.grad for p in self.module.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        self._unflatten_into(flat / dist.get_world_size(), grads)

    @staticmethod
    def _unflatten_into(flat: torch.Tensor, tensors: list) -> None:
        offset = 0
        for tensor in tensors:
            tensor.copy_(flat[offset:offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()


def next_seq() -> int:
    """1-based SeqNum of the next collective on the default PG (same numbering as Flight Recorder)."""
    return dist.group.WORLD._get_sequence_number_for_group() + 1


def write_truth(args, rank: int, **facts) -> None:
    truth_dir = os.environ.get("CAPTURE_TRUTH_DIR")
    if not truth_dir:
        return
    facts = {"rank": rank, "scenario": args.scenario, "time": time.time(), **facts}
    with open(os.path.join(truth_dir, f"fault_rank{rank}.json"), "w") as f:
        json.dump(facts, f)


def dump_flight_recorder(rank: int) -> None:
    """gloo has no watchdog that dumps on timeout: write the Flight Recorder buffer ourselves."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not prefix or not int(os.environ.get("TORCH_FR_BUFFER_SIZE", "0")):
        return
    from torch._C._distributed_c10d import _dump_fr_trace

    path = f"{prefix}{rank}"
    with open(path, "wb") as f:
        f.write(_dump_fr_trace())
    log.error("wrote Flight Recorder dump to %s", path)


def batches(args, rank: int):
    count = args.steps
    if args.scenario == "uneven_inputs" and rank == args.fault_rank:
        count = args.fault_step - 1  # this rank's shard is shorter
    generator = torch.Generator().manual_seed(1234 + rank)
    for _ in range(count):
        yield torch.randn(16, 32, generator=generator), torch.randint(0, 4, (16,), generator=generator)


def load_batch(args, rank: int, step: int, batch):
    if rank == args.fault_rank and step == args.fault_step and args.scenario in ("stalled_rank", "join_check_stall"):
        write_truth(args, rank, step=step, seq=next_seq(), action="stalled in data loading")
        log.info("reading shard from /data/train-%05d.tar", rank)
        time.sleep(args.stall_seconds)  # a hung NFS read / deadlocked dataloader worker
    if rank == args.fault_rank and step == args.fault_step and args.scenario == "lone_health_check":
        # A rank-local "are my peers alive?" check after a slow read, on this rank only: gloo's
        # monitored_barrier takes collective tags (the Flight Recorder's collective_seq_id) but
        # records no entry and leaves the PG sequence number alone.
        write_truth(args, rank, step=step, seq=next_seq(), action="monitored_barrier on this rank only, timeout caught")
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=args.health_timeout))
        except RuntimeError as exc:
            log.warning("peer health check failed, continuing: %s", str(exc).splitlines()[0])
    if rank == args.fault_rank and args.scenario == "straggler":
        time.sleep(2 * COMPUTE_SECONDS)  # three times the others' step time
    return batch


def join_check(args) -> None:
    """join_check_stall: before each step every rank checks that its peers are still in the job
    with gloo's monitored_barrier (as a per-batch join check does), and fails if one is not."""
    if args.scenario == "join_check_stall":
        dist.monitored_barrier(timeout=timedelta(seconds=args.health_timeout))


def sync_metrics(args, rank: int, step: int, loss: torch.Tensor, samples: int) -> torch.Tensor:
    metrics = torch.tensor([loss.item() * samples, float(samples)])
    stop = torch.zeros(1)
    faulty = rank == args.fault_rank and step >= args.fault_step
    if args.scenario == "shape_mismatch" and faulty:
        if step == args.fault_step:
            write_truth(args, rank, step=step, seq=next_seq(), action="all_reduce of numel 3 instead of 2")
        metrics = torch.cat([metrics, torch.tensor([float(step)])])  # an extra metric on one rank
    if args.scenario == "missing_collective" and rank == args.fault_rank and step == args.fault_step:
        write_truth(args, rank, step=step, seq=next_seq(), action="skipped metrics all_reduce")
        log.info("skipping metrics sync: non-finite loss guard")
        dist.broadcast(stop, src=0)
        return metrics
    if args.scenario == "op_order_mismatch" and rank == args.fault_rank and step == args.fault_step:
        write_truth(args, rank, step=step, seq=next_seq(), action="broadcast before all_reduce")
        dist.broadcast(stop, src=0)
        dist.all_reduce(metrics)
        return metrics
    dist.all_reduce(metrics)
    dist.broadcast(stop, src=0)
    return metrics


def exchange_tokens(args, rank: int, step: int) -> None:
    """alltoall_split_mismatch only: an uneven all_to_all_single per step, as an MoE token dispatch.

    Rank r sends r+1 tokens to every rank and receives s+1 from rank s. At the fault step the
    injected rank sizes its receive from the next rank one too large (a stale count): gloo accepts
    a receive that gets fewer bytes than its buffer, so nothing fails."""
    if args.scenario != "alltoall_split_mismatch":
        return
    world_size = dist.get_world_size()
    in_splits = [rank + 1] * world_size
    out_splits = [src + 1 for src in range(world_size)]
    if rank == args.fault_rank and step == args.fault_step:
        peer = (rank + 1) % world_size
        out_splits[peer] += 1
        write_truth(args, rank, step=step, seq=next_seq(), action=f"all_to_all_single expecting {out_splits[peer]} tokens from rank {peer}, which sends {peer + 1}")
    tokens = torch.full((sum(in_splits),), float(rank))
    received = torch.empty(sum(out_splits))
    dist.all_to_all_single(received, tokens, out_splits, in_splits)


def maybe_announce_stop(args, rank: int, step: int, stop_flag: torch.Tensor) -> None:
    """async_extra_broadcast: the injected rank announces early stopping with an async broadcast
    (never waited) that no other rank posts; it goes on into the next step's collectives."""
    if args.scenario != "async_extra_broadcast" or rank != args.fault_rank or step != args.fault_step:
        return
    write_truth(args, rank, step=step, seq=next_seq(), action="extra async broadcast on this rank only")
    log.info("announcing early stop to the other ranks")
    dist.broadcast(stop_flag, src=rank, async_op=True)


def maybe_report_loss(args, rank: int, step: int, loss: torch.Tensor) -> None:
    """unmatched_send: the injected rank sends its step loss to a peer for a per-rank loss report
    (a debugging hook switched on on that host only) with dist.isend, never waited; the peer never
    posts the recv. The send takes a SeqNum on the default PG like any operation, but DETAIL checks
    collectives only, so the next collective's fingerprints differ in SequenceNumber alone."""
    if args.scenario != "unmatched_send" or rank != args.fault_rank or step != args.fault_step:
        return
    peer = 0 if rank != 0 else 1
    write_truth(args, rank, step=step, seq=next_seq(), action=f"isend of the step loss to rank {peer}, which posts no recv")
    dist.isend(loss.detach().reshape(1), dst=peer)


def maybe_checkpoint(args, rank: int, step: int, model) -> None:
    """The classic bug: a barrier inside an `if rank == 0:` checkpoint branch."""
    if args.scenario != "rank0_only_collective" or step != args.fault_step or rank != 0:
        return
    write_truth(args, rank, step=step, seq=next_seq(), action="barrier only on rank 0")
    log.info("saving checkpoint for step %d", step)
    torch.save(model.state_dict(), os.devnull)
    dist.barrier()


def maybe_crash(args, rank: int, step: int) -> None:
    if rank != args.fault_rank or step != args.fault_step:
        return
    if args.scenario == "crash_exception":
        write_truth(args, rank, step=step, seq=next_seq(), action="raised RuntimeError")
        raise RuntimeError(f"corrupt record in /data/train-{rank:05d}.tar at offset 81920")
    if args.scenario == "crash_sigkill":
        write_truth(args, rank, step=step, seq=next_seq(), action="SIGKILL to self")
        os.kill(os.getpid(), signal.SIGKILL)  # what the kernel OOM killer does
    if args.scenario == "silent_exit":
        write_truth(args, rank, step=step, seq=next_seq(), action="os._exit(1) without a word")
        os._exit(1)  # a library's exit on a failed check that logs nowhere (no traceback, no flush)


def validate_on_fault_rank(args, rank: int, step: int, model) -> None:
    """One rank evaluates through the DDP wrapper with grad enabled: DDP broadcasts BN buffers there only."""
    if args.scenario != "bn_eval_desync" or rank != args.fault_rank or step != args.fault_step:
        return
    write_truth(args, rank, step=step, seq=next_seq(), action="extra DDP forward (buffer broadcast)")
    log.info("running quick validation on this rank")
    model.eval()
    model(torch.randn(8, 32))
    model.train()


def evaluate_on_main_only(args, rank: int, step: int) -> None:
    """rank0_eval_gather: an evaluation only the main process runs (a main-only progress bar or
    metric), gathering its predictions from every rank with dist.all_gather; the others go on
    into the step."""
    if args.scenario != "rank0_eval_gather" or rank != 0 or step != args.fault_step:
        return
    write_truth(args, rank, step=step, seq=next_seq(), action="all_gather of evaluation predictions on rank 0 only")
    log.info("step %d: running evaluation on the main process", step)
    predictions = torch.zeros(4)
    dist.all_gather([torch.zeros(4) for _ in range(dist.get_world_size())], predictions)


def out_of_memory_skipped(args, rank: int, step: int) -> bool:
    """oom_skip_batch: the injected rank's step needs more memory than the machine has (a real
    allocation, which fails); like fairseq's and many scripts' OOM recovery, it logs a warning and
    skips the batch, while the others run the step."""
    if args.scenario != "oom_skip_batch" or rank != args.fault_rank or step != args.fault_step:
        return False
    try:
        torch.empty(1 << 46, dtype=torch.uint8)   # 64 TiB: the allocator refuses it
    except RuntimeError as oom:
        write_truth(args, rank, step=step, seq=next_seq(), action="caught an out-of-memory error, skipped the batch")
        log.warning("step %d: %s; skipping batch", step, str(oom).splitlines()[0])
        return True
    return False


def train(args) -> None:
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    setup_logging(rank)
    log.info("host=%s pid=%d local_rank=%d world_size=%d", socket.gethostname(), os.getpid(), local_rank, world_size)
    torch.manual_seed(0)
    mismatch = args.scenario == "ddp_param_mismatch" and rank == args.fault_rank
    if mismatch:
        write_truth(args, rank, step=0, seq=next_seq(), action="model with an extra layer")
    model = Classifier(extra_layer=mismatch, batchnorm=args.scenario == "bn_eval_desync")
    parallel_model = HandWrittenDataParallel(model) if args.no_ddp else DistributedDataParallel(model)
    optimizer = torch.optim.SGD(parallel_model.parameters(), lr=0.05)
    try:
        run_steps(args, rank, parallel_model, optimizer)
    except RuntimeError:
        log.exception("training failed")
        dump_flight_recorder(rank)
        raise
    dump_flight_recorder(rank)
    log.info("training finished")
    if args.scenario == "uneven_inputs" and rank == args.fault_rank:
        write_truth(args, rank, step=args.fault_step - 1, seq=next_seq(), action="left after its last batch")
        log.info("data exhausted, leaving")
        return  # exits cleanly; the others are still in step fault_step
    dist.barrier()
    if args.scenario == "error_after_end" and rank == args.fault_rank:
        # shutdown noise: a helper that reports the run's metrics fails after training ended well
        write_truth(args, rank, step=args.steps, seq=None, action="logged an error after training finished")
        log.error("uploading the run's metrics failed: ConnectionError: [Errno 111] Connection refused (metrics.internal:8086)")
    dist.destroy_process_group()


def run_steps(args, rank: int, parallel_model, optimizer) -> None:
    for step, batch in enumerate(batches(args, rank), start=1):
        step_started = time.monotonic()
        inputs, labels = load_batch(args, rank, step, batch)
        data_time = time.monotonic() - step_started
        join_check(args)
        maybe_crash(args, rank, step)
        exchange_tokens(args, rank, step)
        validate_on_fault_rank(args, rank, step, parallel_model)
        evaluate_on_main_only(args, rank, step)
        if out_of_memory_skipped(args, rank, step):
            continue
        time.sleep(COMPUTE_SECONDS)
        loss = nn.functional.cross_entropy(parallel_model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        if isinstance(parallel_model, HandWrittenDataParallel):
            parallel_model.average_gradients()
        optimizer.step()
        metrics = sync_metrics(args, rank, step, loss, len(labels))
        log.info("step %d/%d loss %.4f data_time %.3fs step_time %.3fs", step, args.steps,
                 (metrics[0] / metrics[1]).item(), data_time, time.monotonic() - step_started)
        maybe_report_loss(args, rank, step, loss)
        maybe_checkpoint(args, rank, step, parallel_model)
        maybe_announce_stop(args, rank, step, torch.ones(1))


def main() -> None:
    args = parse_args()
    (record(train) if args.record else train)(args)


if __name__ == "__main__":
    main()
