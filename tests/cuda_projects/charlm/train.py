"""Train a character model on a repeating text, then save and reload the whole module: one NVIDIA GPU."""
import argparse
import os

import torch

from charlm_lib.engine import cuda_device, timed_step
from charlm_lib.model import CharLM

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--out", default="charlm.pt")
args = parser.parse_args()

device, fast = cuda_device(seed=7)
text = "the quick brown fox jumps over the lazy dog. " * 40
chars = sorted(set(text))
data = torch.tensor([chars.index(c) for c in text]).cuda()
block = 16
model = CharLM(len(chars), block, 32, fast).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
scaler = torch.cuda.amp.GradScaler()
generator = torch.Generator().manual_seed(0)
for step in range(1, args.steps + 1):
    starts = torch.randint(len(data) - block - 1, (8,), generator=generator).tolist()
    x = torch.stack([data[i:i + block] for i in starts]).to(device)
    y = torch.stack([data[i + 1:i + block + 1] for i in starts]).to(device)
    loss, ms, peak = timed_step(model, optimizer, scaler, x, y)
    if step % 5 == 0:
        print(f"step {step}: loss {loss:.5f} ({ms:.1f} ms, peak memory {peak} B)")
model.eval()
torch.save(model, args.out)
reloaded = torch.load(args.out, weights_only=False)
probe = data[:block].unsqueeze(0).cuda()
with torch.no_grad():
    same = torch.equal(model(probe)[0], reloaded(probe)[0])
print(f"reloaded whole module on {next(reloaded.parameters()).device.type}: outputs equal {same}")
os.remove(args.out)
