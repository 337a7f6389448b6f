"""The classic single-node DDP script: ``mp.spawn(main, nprocs=torch.cuda.device_count())``, one GPU per child.

``python train.py OUT [NPROCS] [WORKER_START_METHOD]``: each child sets its GPU, joins an NCCL group, trains with a
DataLoader whose worker (started with WORKER_START_METHOD, default fork) asks ``torch.cuda.is_available()``;
rank 0 writes the losses, where its parameters live and what the worker saw to OUT (JSON).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # module level: runs again in every child


class Pairs(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g), torch.randn(1, generator=g), int(torch.cuda.is_available())


def main(rank, world, port, out, method):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).cuda(rank)
    ddp = DDP(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    loader = DataLoader(Pairs(), batch_size=8, num_workers=1, multiprocessing_context=method)
    losses, seen = [], set()
    for x, y, available in loader:
        loss = nn.functional.mse_loss(ddp(x.cuda(rank)), y.cuda(rank))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 6))
        seen.update(available.tolist())
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"world": world, "device": DEVICE, "params_on": next(model.parameters()).device.type,
                       "worker_saw_cuda": sorted(seen), "losses": losses}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    nprocs = int(sys.argv[2]) if len(sys.argv) > 2 else torch.cuda.device_count()
    method = sys.argv[3] if len(sys.argv) > 3 else "fork"
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(main, args=(nprocs, port, sys.argv[1], method), nprocs=nprocs)
