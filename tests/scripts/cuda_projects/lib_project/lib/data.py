"""A learnable toy task: predict the sum of a vector's halves, batches made on the CPU and sent to the GPU."""
import torch


def get_batch(generator, batch_size=32, dim=16):
    x = torch.randn(batch_size, dim, generator=generator)
    y = x[:, : dim // 2].sum(dim=1, keepdim=True) - x[:, dim // 2:].sum(dim=1, keepdim=True)
    return x.cuda(non_blocking=True), y.cuda(non_blocking=True)
