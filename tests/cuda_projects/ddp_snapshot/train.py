"""A torchrun-style DDP regression trainer for NVIDIA GPUs that snapshots every epoch and resumes."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--snapshot", default="snapshot.pt")
parser.add_argument("--resume", default="")
args = parser.parse_args()

ddp = "RANK" in os.environ
if ddp:
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
else:
    local_rank = 0
torch.cuda.set_device(local_rank)
device = f"cuda:{local_rank}"
torch.manual_seed(0)

inputs = torch.linspace(-2, 2, 256).unsqueeze(1).repeat(1, 4) * torch.tensor([1.0, -0.5, 0.25, 2.0])
targets = (inputs.sum(dim=1, keepdim=True) * 0.7 + 0.1)
data = TensorDataset(inputs, targets)
sampler = DistributedSampler(data, shuffle=False) if ddp else None
loader = DataLoader(data, batch_size=32, sampler=sampler, shuffle=False, pin_memory=True)

model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
first_epoch = 0
if args.resume:
    snapshot = torch.load(args.resume)  # saved on a GPU: its storages carry their cuda:N tags
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    first_epoch = snapshot["epoch"]
if ddp:
    model = DDP(model, device_ids=[local_rank])

for epoch in range(first_epoch, args.epochs):
    if sampler is not None:
        sampler.set_epoch(epoch)
    total = torch.zeros((), device=device)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) if epoch == 0 else torch.no_grad():
        pass
    for x, y in loader:
        torch.cuda.nvtx.range_push("step")
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
        torch.cuda.nvtx.range_pop()
    if ddp:
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
    if not ddp or dist.get_rank() == 0:
        print(f"epoch {epoch + 1}: loss {total.item() / len(loader):.6f}")
        raw = model.module if ddp else model
        torch.save({"model": raw.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1}, args.snapshot)
if ddp:
    dist.destroy_process_group()
