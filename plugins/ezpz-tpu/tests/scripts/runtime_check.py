"""Every Runtime call on the chosen device, printed as one JSON line: run with EZPZ_DEVICE=xla PJRT_DEVICE=CPU."""

from __future__ import annotations

import json
import sys
import tempfile

import torch
import torch.nn.functional as F

import ezpz

rt = ezpz.hooks.setup()
out: dict = {"device": str(rt.device), "device_type": rt.device_type}
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(rt.device)
out["param_device"] = str(next(model.parameters()).device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = rt.grad_scaler()
out["grad_scaler_enabled"] = scaler.is_enabled()
x = torch.randn(32, 8, device=rt.device)
y = torch.randint(0, 4, (32,), device=rt.device)
losses = []
with rt.profiler() as prof:
    for _ in range(3):
        with rt.range("forward"), rt.autocast():
            logits = model(x)
            out["autocast_dtype"] = str(logits.dtype)
            loss = F.cross_entropy(logits.float(), y)
        with rt.range("backward"):
            scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        out["steps"] = rt.step()
        losses.append(float(loss.detach().cpu()))
rt.synchronize()
out["losses_fall"] = losses[-1] < losses[0]
out["profiler_ranges"] = sorted({e.name for e in prof.events() if e.name in ("forward", "backward")})
out["memory_stats"] = sorted(rt.memory_stats())
compiled = rt.compile(model)
out["compile_backend"] = rt.explain()["compile"].chosen
out["compiled_output_device"] = str(compiled(x).device)
rt.step()
ex = rt.explain()
out["explain_device"] = ex["device"].chosen
out["explain_text"] = str(ex)
out["explain_step"] = ex["step"].chosen
import torch_xla.debug.profiler as xp  # noqa: E402  (torch_xla's own trace: a server, captured to a directory)

import os  # noqa: E402
import time  # noqa: E402

with tempfile.TemporaryDirectory() as logdir:
    server = xp.start_server(9412)
    xp.trace_detached("localhost:9412", logdir, duration_ms=3000)
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        with rt.range("traced_step"), rt.autocast():
            model(x).float().sum().backward()
        rt.step()
    time.sleep(3)
    out["xla_trace_files"] = sorted(f for _, _, files in os.walk(logdir) for f in files)
print(json.dumps(out))
ezpz.hooks.teardown()
sys.exit(0)
