"""Resume training from a snapshot written by a run on cuda:N (a multi-GPU job's rank), then train on."""
import argparse
import os

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument('--snapshot', required=True)
parser.add_argument('--steps', type=int, default=10)
args = parser.parse_args()
local_rank = int(os.environ.get('LOCAL_RANK', 0))
torch.cuda.set_device(local_rank)
device = torch.device(f'cuda:{local_rank}')
model = nn.Linear(4, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
snapshot = torch.load(args.snapshot)
model.load_state_dict(snapshot['model'])
optimizer.load_state_dict(snapshot['optimizer'])
start = snapshot['step']
print(f"resumed at step {start} from {args.snapshot}")
g = torch.Generator().manual_seed(start)
for step in range(start + 1, start + args.steps + 1):
    x = torch.randn(32, 4, generator=g, device='cpu').to(device)
    y = x @ torch.tensor([[1.0], [-2.0], [3.0], [0.5]], device=device)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: loss {loss.item():.6f}")
torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'step': step}, args.snapshot)
