"""A training script written against the original ezpz's names only, run under torchrun by tests/test_compat.py.

    torchrun --nproc-per-node 2 original_ezpz_script.py 2 [ddp|fsdp]

Every rank checks its rank layout, an all-reduce, that the wrapped model
trains, and (DDP) that gradients agree across ranks, then prints one JSON
line. Exit status is non-zero on any mismatch.
"""

import json
import sys

import torch
import torch.distributed as dist

import ezpz

expected_world = int(sys.argv[1])
use_fsdp = len(sys.argv) > 2 and sys.argv[2] == "fsdp"

rank_before_setup = ezpz.get_rank()  # the original's getters read the launcher's variables before setup
rank = ezpz.setup_torch(seed=1234)
world_size = ezpz.get_world_size()
local_rank = ezpz.get_local_rank()
device = ezpz.get_torch_device()  # a string, as in the original ("cpu" here)
device_type = ezpz.get_torch_device_type()
backend = ezpz.get_torch_backend()

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to(device)
model = ezpz.wrap_model(model, use_fsdp=use_fsdp, dtype="fp32" if use_fsdp else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4, device=device)  # different on every rank: setup_torch(seed=) seeds seed + rank
loss = model(x).pow(2).mean()
loss.backward()

grads_agree = True
if not use_fsdp:  # DDP averages gradients: every rank must hold the same ones
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    gathered = [torch.empty_like(grad) for _ in range(world_size)]
    dist.all_gather(gathered, grad)
    grads_agree = all(torch.allclose(g, gathered[0]) for g in gathered)
optimizer.step()

value = torch.tensor([float(rank + 1)], device=device)
dist.all_reduce(value)
ezpz.synchronize()
ezpz.barrier()

expected_sum = expected_world * (expected_world + 1) / 2
ok = (
    value.item() == expected_sum
    and world_size == expected_world == dist.get_world_size()
    and rank == dist.get_rank() == rank_before_setup
    and 0 <= local_rank < world_size
    and isinstance(device, str)
    and device_type == "cpu"
    and backend == "gloo"
    and grads_agree
    and bool(torch.isfinite(loss))
    and type(model).__name__ == ("FSDPSequential" if use_fsdp else "DistributedDataParallel")
)
print(json.dumps({
    "rank": rank, "rank_before_setup": rank_before_setup, "local_rank": local_rank, "world_size": world_size,
    "device": device, "device_type": device_type, "backend": backend, "sum": value.item(),
    "grads_agree": grads_agree, "wrapper": type(model).__name__, "ok": ok,
}), flush=True)
# Release the wrapped model first: a DDP model that outlives the process group can abort at interpreter exit under
# gloo ("terminate called without an active exception"; seen once in ~3 full CI runs, 0 of 20 alone). Known and open,
# documented in docs/portable-script.md; this test checks the original's API, not that exit path.
del model, optimizer
ezpz.cleanup()
sys.exit(0 if ok and not dist.is_initialized() else 1)
