"""Lightning (`strategy="ddp"`, `accelerator="cpu"`, gloo): a small MLP LightningModule, --steps steps.

The timeout is Lightning's own setting, `DDPStrategy(timeout=...)`. Lightning finds the cluster
itself: TorchElasticEnvironment under torchrun, MPIEnvironment under mpirun (mpi4py),
SLURMEnvironment under srun; `devices`/`num_nodes` are taken from the launcher so that they agree.
Per step: DDP's gradient ALLREDUCE, then (on_train_batch_end) the app's metrics ALLREDUCE
(`strategy.reduce`, numel 2) and stop-flag BROADCAST (numel 1); rank 0 prints the progress bar,
every rank logs its step line. Faults: faults.py.
"""
import argparse
import logging
import os
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faults  # noqa: E402

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402
from torch import nn  # noqa: E402

COMPUTE_SECONDS = 0.1


class Shard(torch.utils.data.IterableDataset):
    """This rank's batches; the fault's data hook runs where a slow or hung read would be."""

    def __init__(self, module, n: int, rank: int):
        self.module, self.n, self.rank = module, n, rank

    def __iter__(self):
        generator = torch.Generator().manual_seed(1234 + self.rank)
        for step in range(1, self.n + 1):
            started = time.monotonic()
            self.module.fault.data(step)
            self.module.data_time = time.monotonic() - started
            yield torch.randn(16, 32, generator=generator), torch.randint(0, 4, (16,), generator=generator)


class Classifier(pl.LightningModule):
    def __init__(self, args, rank, log):
        super().__init__()
        self.args, self.rank_, self.log_ = args, rank, log
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
        self.data_time = 0.0

    def setup(self, stage):
        strategy = self.trainer.strategy
        self.fault = faults.Fault(self.args, self.global_rank, self.trainer.world_size, self.log_,
                                  all_reduce=lambda t: strategy.reduce(t, reduce_op="sum"),
                                  barrier=lambda: strategy.barrier("checkpoint"))

    def train_dataloader(self):
        return torch.utils.data.DataLoader(Shard(self, self.fault.num_batches(self.args.steps), self.global_rank),
                                           batch_size=None)

    def training_step(self, batch, batch_idx):
        step = batch_idx + 1
        self.started = time.monotonic() - self.data_time
        self.fault.before_forward(step)
        time.sleep(COMPUTE_SECONDS)
        inputs, labels = batch
        loss = nn.functional.cross_entropy(self.net(inputs), labels)
        self.log("train_loss", loss, prog_bar=True)
        self.last_loss = loss.item()
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        step = batch_idx + 1
        metrics = self.fault.sync_metrics(step, self.last_loss, 16)
        self.log_.info("Epoch %d, global step %d/%d: train_loss=%.4f data_time=%.3fs step_time=%.3fs", self.current_epoch,
                       self.global_step, self.args.steps, (metrics[0] / metrics[1]).item(), self.data_time,
                       time.monotonic() - self.started)
        self.fault.after_step(step)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def launcher_layout() -> tuple[int, int]:
    """(devices per node, num_nodes) as the launcher started the processes."""
    env = os.environ
    if "LOCAL_WORLD_SIZE" in env:
        return int(env["LOCAL_WORLD_SIZE"]), int(env["WORLD_SIZE"]) // int(env["LOCAL_WORLD_SIZE"])
    if "OMPI_COMM_WORLD_LOCAL_SIZE" in env:
        local = int(env["OMPI_COMM_WORLD_LOCAL_SIZE"])
        return local, int(env["OMPI_COMM_WORLD_SIZE"]) // local
    if "SLURM_NTASKS_PER_NODE" in env:
        return int(env["SLURM_NTASKS_PER_NODE"]), int(env["SLURM_NNODES"])
    return 1, 1


def main() -> None:
    parser = argparse.ArgumentParser()
    faults.add_fault_args(parser)
    args = parser.parse_args()
    rank, world_size, local_rank = faults.identity()
    log = faults.setup_logging("lightning_train", f"%(asctime)s %(levelname)s [rank: {rank}] %(message)s")
    log.info("host=%s pid=%d local_rank=%d world_size=%d", faults.hostname(), os.getpid(), local_rank, world_size)
    devices, num_nodes = launcher_layout()
    torch.manual_seed(0)
    module = Classifier(args, rank, log)
    trainer = pl.Trainer(
        accelerator="cpu", devices=devices, num_nodes=num_nodes, max_steps=args.steps, max_epochs=1,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=args.timeout)),
        logger=False, enable_checkpointing=False, enable_model_summary=True, log_every_n_steps=1,
        enable_progress_bar=True,
    )
    try:
        trainer.fit(module)
    except RuntimeError:
        log.exception("training failed")
        faults.dump_flight_recorder(rank, log)
        raise
    faults.dump_flight_recorder(rank, log)
    if module.global_step < args.steps:
        module.fault.left_early(module.global_step)
        log.info("data exhausted after %d batches, leaving", module.global_step)
        return
    log.info("training finished")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
