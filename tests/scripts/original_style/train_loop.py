"""A small training loop in the original ezpz's style: setup_torch, wrap_model, timed steps, memory metrics.

    python train_loop.py [steps]     torchrun --nproc-per-node 2 train_loop.py [steps]

Run unmodified by tests/test_original_scripts.py; it prints one JSON line per rank.
"""

import json
import sys

import torch

import ezpz

logger = ezpz.get_logger(__name__)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3

rank = ezpz.setup_torch(seed=1234)
device = ezpz.get_torch_device()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
model = ezpz.wrap_model(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)


@ezpz.timeitlogit(rank=ezpz.get_rank(), verbose=True)
def train_step(step):
    x = torch.randn(4, 8, device=device)
    optimizer.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss.item()


losses = []
for step in range(steps):
    loss = train_step(step)
    losses.append(loss)
    metrics = {"step": step, "loss": loss, **ezpz.get_memory_metrics()}
    logger.info("step=%d loss=%.4f metrics=%s", step, loss, sorted(metrics))
ezpz.barrier()
total = ezpz.distributed.all_reduce(1)
print(json.dumps({"rank": rank, "world_size": ezpz.get_world_size(), "device": device, "steps": len(losses),
                  "wrapped": type(model).__name__, "all_reduce": total}), flush=True)
ezpz.cleanup()
