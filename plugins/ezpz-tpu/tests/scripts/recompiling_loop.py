"""A CUDA-style loop (no rt.step()) whose step bakes a new value into XLA's graph every step.

The loss exponent is annealed as a Python float: ``pow`` takes its exponent as a constant of the graph (measured
with torch-xla 2.9.0; a Python-float learning rate, by contrast, is passed as device data and does not
recompile), so every step compiles anew. ezpz's recompile watch must name it once, on its own.
"""

import torch
import torch.nn.functional as F
from torch import nn

import ezpz

rt = ezpz.hooks.setup()
torch.manual_seed(0)
model = nn.Linear(16, 1).to(rt.device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for step in range(12):
    gamma = 2.0 - 0.05 * step  # annealed, as a Python float
    x = torch.randn(8, 16).to(rt.device)
    loss = (model(x) - 1).abs().pow(gamma).mean() + F.mse_loss(model(x), torch.zeros(8, 1, device=rt.device))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
print(f"done: loss {loss.item():.4f}")
