"""A small MLP, built straight onto the GPU."""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, dim=16, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def make_model(dim=16):
    torch.manual_seed(0)
    model = MLP(dim).cuda()
    return model
