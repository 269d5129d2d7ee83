"""Style 1: pytorch/examples `distributed/ddp-tutorial-series/multigpu.py`,
ported to CPU/gloo: mp.spawn, MASTER_ADDR/PORT set in ddp_setup, a Trainer
class, plain print() from every rank.

    python ddp_spawn.py 4 2 --batch_size 32 --world_size 4
"""
import os
from datetime import timedelta

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

# --- Additional modules required for Distributed Training
import torch.multiprocessing as mp
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group
# ---

import truth  # fault injection + ground truth (silent unless the capture harness asks)


class MyTrainDataset(Dataset):
    def __init__(self, size, rank=0, batch_size=32):
        self.size = size
        self.rank = rank
        self.batch_size = batch_size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if truth.on_fetch(self.rank, self.batch_size) == "corrupt":
            raise OSError(f"image file is truncated (3 bytes not processed): sample {index}")
        return self.data[index]


def ddp_setup(rank, world_size):
    """
    Args:
        rank: Unique identifier of each process
        world_size: Total number of processes
    """
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ.setdefault("MASTER_PORT", "12355")
    init_process_group(backend="gloo", rank=rank, world_size=world_size,
                       timeout=timedelta(seconds=20))


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        gpu_id: int,
        save_every: int,
        snapshot_path: str,
    ) -> None:
        self.gpu_id = gpu_id
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.global_step = 0
        self.model = DDP(model)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            if truth.at_step(self.gpu_id, self.global_step):
                print(f"[GPU{self.gpu_id}] no more batches, stopping")
                return False
            loss = self._run_batch(source, targets)
            if self.global_step % 2 == 0:
                print(f"[GPU{self.gpu_id}] Epoch {epoch} | step {self.global_step} | loss {loss:.4f}")
            self.global_step += 1
        return True

    def _save_checkpoint(self, epoch):
        ckp = self.model.module.state_dict()
        PATH = self.snapshot_path
        torch.save(ckp, PATH)
        print(f"Epoch {epoch} | Training checkpoint saved at {PATH}")

    def train(self, max_epochs: int):
        for epoch in range(max_epochs):
            if not self._run_epoch(epoch):
                break
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_checkpoint(epoch)


def load_train_objs(rank, batch_size):
    train_set = MyTrainDataset(512, rank, batch_size)  # load your dataset
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))  # load your model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=False,
        shuffle=False,
        sampler=DistributedSampler(dataset)
    )


def main(rank: int, world_size: int, save_every: int, total_epochs: int, batch_size: int, snapshot_path: str):
    print(f"Running basic DDP example on rank {rank}.")
    ddp_setup(rank, world_size)
    dataset, model, optimizer = load_train_objs(rank, batch_size)
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, rank, save_every, snapshot_path)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description='simple distributed training job')
    parser.add_argument('total_epochs', type=int, help='Total epochs to train the model')
    parser.add_argument('save_every', type=int, help='How often to save a snapshot')
    parser.add_argument('--batch_size', default=32, type=int, help='Input batch size on each device (default: 32)')
    parser.add_argument('--world_size', default=2, type=int, help='Number of processes (no GPUs here)')
    parser.add_argument('--snapshot_path', default='/tmp/snapshot.pt', type=str)
    args = parser.parse_args()

    world_size = args.world_size
    mp.spawn(main, args=(world_size, args.save_every, args.total_epochs, args.batch_size, args.snapshot_path), nprocs=world_size)
