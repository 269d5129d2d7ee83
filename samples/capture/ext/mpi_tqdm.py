"""Style 4: "Writing Distributed Applications with PyTorch" tutorial style,
launched by Open MPI's mpirun (rank/size read from OMPI_COMM_WORLD_*), gradients
averaged by hand with one all_reduce per parameter, a tqdm bar on every rank
and print(..., flush=True).

    mpirun -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 python mpi_tqdm.py
"""
import os
import sys
from datetime import timedelta
from math import ceil
from random import Random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from tqdm import tqdm

import truth  # fault injection + ground truth (silent unless the capture harness asks)


class Partition(object):
    """ Dataset-like object, but only access a subset of it. """

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner(object):
    """ Partitions a dataset into different chuncks. """

    def __init__(self, data, sizes=[0.7, 0.2, 0.1], seed=1234):
        self.data = data
        self.partitions = []
        rng = Random()
        rng.seed(seed)
        data_len = len(data)
        indexes = [x for x in range(0, data_len)]
        rng.shuffle(indexes)

        for frac in sizes:
            part_len = int(frac * data_len)
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


class FakeMNIST(torch.utils.data.Dataset):
    def __init__(self, n=2048, rank=0, batch_size=32):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 1, 28, 28, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.rank, self.batch_size = rank, batch_size

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if truth.on_fetch(self.rank, self.batch_size) == "corrupt":
            raise ValueError(f"cannot reshape array of size 392 into shape (28,28) (record {i})")
        return self.x[i], self.y[i]


class Net(nn.Module):
    """ Network architecture. """

    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def partition_dataset(rank, size):
    """ Partitioning MNIST """
    bsz = 128 // size
    dataset = FakeMNIST(n=1024, rank=rank, batch_size=bsz)
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(partition, batch_size=bsz, shuffle=True)
    return train_set, bsz


def average_gradients(model, step):
    """ Gradient averaging. """
    size = float(dist.get_world_size())
    rank = dist.get_rank()
    truth.set_step(step)
    for name, param in model.named_parameters():
        grad = param.grad.data
        if name == "fc1.weight" and truth.wrong_size(rank, f"all_reduce of grad {name}"):
            grad = grad[:, :-1].contiguous()
        if name == "fc1.weight" and truth.skip_collective(rank, f"all_reduce of grad {name}"):
            continue
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def run(rank, size, epochs):
    """ Distributed Synchronous SGD Example """
    torch.manual_seed(1234)
    train_set, bsz = partition_dataset(rank, size)
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)

    num_batches = ceil(len(train_set.dataset) / float(bsz))
    print(f"Rank {rank}: {len(train_set.dataset)} samples, {num_batches} batches of {bsz}", flush=True)
    step = 0
    for epoch in range(epochs):
        epoch_loss = 0.0
        for data, target in tqdm(train_set, desc=f"[rank {rank}] epoch {epoch}", position=rank, disable=False):
            if truth.at_step(rank, step):
                print(f"Rank {rank}: stopping early at step {step}", flush=True)
                return
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model, step)
            optimizer.step()
            step += 1
        print('Rank ', dist.get_rank(), ', epoch ', epoch, ': ', epoch_loss / num_batches, flush=True)


def init_process(rank, size, fn, backend='gloo'):
    """ Initialize the distributed environment. """
    addr = os.environ.get('MASTER_ADDR', '127.0.0.1')
    port = os.environ.get('MASTER_PORT', '29500')
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank, world_size=size,
                            timeout=timedelta(seconds=20))
    fn(rank, size, int(os.environ.get("EPOCHS", "2")))


if __name__ == "__main__":
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    print(f"Hello from rank {rank} of {size} on {os.uname().nodename} (local rank "
          f"{os.environ.get('OMPI_COMM_WORLD_LOCAL_RANK')})", flush=True)
    init_process(rank, size, run)
    dist.destroy_process_group()
    print(f"Rank {rank}: done", flush=True)
