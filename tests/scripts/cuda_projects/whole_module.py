"""Train a little, save the whole model object (not a state dict), load it back and check it answers the same."""
import argparse

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x)


parser = argparse.ArgumentParser()
parser.add_argument('--path', default='net.pt')
parser.add_argument('--steps', type=int, default=20)
args = parser.parse_args()
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
torch.manual_seed(0)
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(0)
for step in range(1, args.steps + 1):
    x = torch.randn(64, 8, generator=g).to(device)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: loss {loss.item():.6f}")
torch.save(model, args.path)
reloaded = torch.load(args.path, weights_only=False)
probe = torch.randn(4, 8, generator=g).cuda()
same = torch.equal(model(probe), reloaded(probe))
print(f"reloaded on {next(reloaded.parameters()).device}: same outputs {same}")
