"""A CUDA DDP script that leaves its inputs on the host: ``DDP(device_ids=[rank])`` moves them (as on CUDA).

pytorch/examples' distributed/ddp/example.py does this: ``ddp_model(torch.randn(20, 10))`` with the labels
on ``rank``. Prints ``rank R output DEVICE loss L`` per step.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5)).to(rank)
ddp_model = DDP(model, device_ids=[rank])
optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))  # on the host: DDP moves it to device_ids[0]
    loss = nn.functional.mse_loss(outputs, torch.randn(20, 5).to(rank))
    loss.backward()
    optimizer.step()
    print(f"rank {dist.get_rank()} output {outputs.device.type} loss {loss.item():.6f}", flush=True)
dist.destroy_process_group()
