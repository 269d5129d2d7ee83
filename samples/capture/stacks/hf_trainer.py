"""HF `transformers` Trainer on CPU/gloo: a 2-layer GPT-2 built from a config (no download), --steps steps.

The process group is created here with the short timeout before TrainingArguments: with
`use_cpu=True` the Trainer does not pass `ddp_timeout` to the process group (transformers 5.x
`TrainingArguments._setup_devices` sets it only for the non-CPU branches), and accelerate's
PartialState reuses a group that already exists. Logging as in the transformers example scripts
(`%(asctime)s - %(levelname)s - %(name)s - %(message)s`); the Trainer's own progress bar and log
dicts on rank 0; a callback logs every rank's step, loss and timing. Per step: DDP's gradient
ALLREDUCE, the app's metrics ALLREDUCE + stop-flag BROADCAST (callback), the Trainer's loss and flos
ALLGATHERs (logging_steps=1). Faults: faults.py (data hook in the collator, the others in callbacks).
"""
import argparse
import logging
import os
import sys
import tempfile
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faults  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import transformers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

SEQ_LEN, BATCH = 16, 4
log = logging.getLogger("__main__")


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n: int):
        generator = torch.Generator().manual_seed(7)
        self.ids = torch.randint(0, 128, (n, SEQ_LEN), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Collator:
    """Batches; the fault's data hook runs here, where a slow or hung read would be."""

    def __init__(self, fault):
        self.fault, self.calls = fault, 0
        self.fetched_at = time.monotonic()

    def __call__(self, features):
        self.calls += 1
        started = time.monotonic()
        self.fault.data(self.calls)
        self.data_time = time.monotonic() - started
        return {k: torch.stack([f[k] for f in features]) for k in features[0]}


class FaultCallback(TrainerCallback):
    def __init__(self, fault, collator, rank):
        self.fault, self.collator, self.rank = fault, collator, rank

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.monotonic()
        self.fault.before_forward(state.global_step + 1)

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        loss = getattr(state, "app_last_loss", 0.0)
        metrics = self.fault.sync_metrics(step, loss, BATCH)
        log.info("rank %d step %d/%d: %s", self.rank, step, state.max_steps,
                 {"loss": round((metrics[0] / metrics[1]).item(), 4), "data_time": round(self.collator.data_time, 3),
                  "step_time": round(time.monotonic() - self.started, 3)})
        self.fault.after_step(step)


class AppTrainer(Trainer):
    """The Trainer, keeping each step's local loss for the app's metrics sync."""

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self.state.app_last_loss = loss.item()
        return loss


def main() -> None:
    parser = argparse.ArgumentParser()
    faults.add_fault_args(parser)
    args = parser.parse_args()
    rank, world_size, local_rank = faults.identity()
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", handlers=[logging.StreamHandler(sys.stderr)])
    log.setLevel(logging.INFO)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    log.warning("Process rank: %d, host: %s, pid: %d, world size: %d, device: cpu", rank, faults.hostname(),
                os.getpid(), world_size)
    fault = faults.Fault(args, rank, world_size, log)
    training_args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="hf-out-"), use_cpu=True, ddp_backend="gloo",
        ddp_timeout=int(args.timeout), per_device_train_batch_size=BATCH, max_steps=args.steps,
        logging_steps=1, save_strategy="no", report_to="none", learning_rate=1e-3,
        dataloader_num_workers=0, log_level="info", log_level_replica="warning", seed=0,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=SEQ_LEN, n_embd=32, n_layer=2, n_head=2))
    collator = Collator(fault)
    trainer = AppTrainer(model=model, args=training_args, train_dataset=TokenDataset(args.steps * BATCH * world_size),
                      data_collator=collator, callbacks=[FaultCallback(fault, collator, rank)])
    try:
        trainer.train()
    except RuntimeError:
        log.exception("rank %d: training failed", rank)
        faults.dump_flight_recorder(rank, log)
        raise
    faults.dump_flight_recorder(rank, log)
    log.info("rank %d: training finished", rank)
    dist.barrier()
    dist.destroy_process_group()
    # Without this, rank 0 deadlocked at interpreter exit in 1 of 1 4-rank runs (torch 2.13): the DDP Reducer's
    # dealloc drops the last reference to ProcessGroupGloo, whose destructor joins a gloo worker thread that
    # waits for the GIL (held by the dealloc) to free an all_gather's tensor.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
