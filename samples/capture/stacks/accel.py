"""`accelerate` on CPU/gloo: a 2-layer BERT classifier built from a config (no download), Accelerator in a
custom loop, --steps steps.

The process group timeout comes from accelerate's own setting, `InitProcessGroupKwargs(timeout=...)`.
The model and optimizer go through `accelerator.prepare` (DDP underneath); each rank reads its own
shard of synthetic batches (not prepared: accelerate's sharded loader would even out the inputs).
Logging through `accelerate.logging.get_logger` with `main_process_only=False`. Per step: DDP's
gradient ALLREDUCE, the app's metrics ALLREDUCE (`accelerator.reduce`, numel 2) and stop-flag
BROADCAST (`accelerate.utils.broadcast`, numel 1); a final BARRIER (`wait_for_everyone`). Faults: faults.py.
"""
import argparse
import logging
import os
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faults  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from accelerate import Accelerator, InitProcessGroupKwargs  # noqa: E402
from accelerate.logging import get_logger  # noqa: E402
from accelerate.utils import broadcast  # noqa: E402
from transformers import BertConfig, BertForSequenceClassification  # noqa: E402

SEQ_LEN, BATCH = 16, 8
COMPUTE_SECONDS = 0.05


def batches(n: int, rank: int):
    generator = torch.Generator().manual_seed(99 + rank)
    for _ in range(n):
        yield torch.randint(0, 128, (BATCH, SEQ_LEN), generator=generator), torch.randint(0, 2, (BATCH,), generator=generator)


def main() -> None:
    parser = argparse.ArgumentParser()
    faults.add_fault_args(parser)
    args = parser.parse_args()
    rank, world_size, local_rank = faults.identity()
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO,
                        handlers=[logging.StreamHandler(sys.stderr)])
    accelerator = Accelerator(cpu=True, kwargs_handlers=[
        InitProcessGroupKwargs(backend="gloo", timeout=timedelta(seconds=args.timeout))])
    log = get_logger("accel_train")
    log.info(f"host={faults.hostname()} pid={os.getpid()} {accelerator.state}".replace("\n", " "), main_process_only=False)
    plain = logging.getLogger("accel_train")
    fault = faults.Fault(args, accelerator.process_index, accelerator.num_processes, plain,
                         all_reduce=lambda t: accelerator.reduce(t, "sum"),
                         broadcast=lambda t, src: broadcast(t, from_process=src),
                         barrier=accelerator.wait_for_everyone)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=SEQ_LEN, num_labels=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    done = 0
    try:
        data = batches(fault.num_batches(args.steps), rank)
        for step in range(1, args.steps + 1):
            started = time.monotonic()
            fault.data(step)
            batch = next(data, None)
            if batch is None:
                break
            input_ids, labels = batch
            data_time = time.monotonic() - started
            fault.before_forward(step)
            time.sleep(COMPUTE_SECONDS)
            loss = model(input_ids=input_ids, labels=labels).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            metrics = fault.sync_metrics(step, loss.item(), BATCH)
            log.info(f"process {accelerator.process_index}: step {step}/{args.steps} "
                     f"loss={(metrics[0] / metrics[1]).item():.4f} data_time={data_time:.3f}s "
                     f"step_time={time.monotonic() - started:.3f}s", main_process_only=False)
            fault.after_step(step)
            done = step
    except RuntimeError:
        plain.exception("process %d: training failed", rank)
        faults.dump_flight_recorder(rank, plain)
        raise
    faults.dump_flight_recorder(rank, plain)
    if done < args.steps:
        fault.left_early(done)
        log.info(f"process {rank}: data exhausted after {done} batches, leaving", main_process_only=False)
        return
    log.info(f"process {rank}: training finished", main_process_only=False)
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
