"""A DDP trainer in today's ``torch.accelerator`` style that needs two devices; saves and resumes a checkpoint.

Run with ``torchrun --nproc-per-node 2 train.py CKPT``: the first run trains 3 steps and saves ``CKPT``; a run that
finds ``CKPT`` loads it and trains 3 more. Rank 0 prints one JSON line.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main(ckpt: str) -> None:
    if not torch.accelerator.is_available():
        raise SystemExit("this example needs an accelerator")
    acc = torch.accelerator.current_accelerator()
    local_rank = int(os.environ["LOCAL_RANK"])
    count = torch.accelerator.device_count()
    if count < 2:
        raise SystemExit(f"this example needs 2 devices, found {count}")
    torch.accelerator.set_device_index(local_rank)
    device = torch.device(f"{acc}:{local_rank}")
    backend = dist.get_default_backend_for_device(device)
    dist.init_process_group(backend, device_id=device)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        start = state["step"]
    ddp = DDP(model, device_ids=[local_rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(3):
        x, y = torch.randn(16, 8, generator=gen).to(device), torch.randn(16, 1, generator=gen).to(device)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.accelerator.synchronize()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(round(total.item() / dist.get_world_size(), 6))
    with torch.accelerator.device_index(local_rank):
        index = torch.accelerator.current_device_index()
    memory = torch.accelerator.memory_allocated(device)
    if rank == 0:
        torch.save({"model": model.state_dict(), "step": start + 3}, ckpt)
        print(json.dumps({"count": count, "backend": backend, "index": index, "memory_int": isinstance(memory, int),
                          "params_on": next(model.parameters()).device.type, "start": start, "losses": losses}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
