"""Entry point: train the MLP with AMP and print the loss every 5 steps (CUDA-only as written)."""
import argparse
import time

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from lib.data import get_batch
from lib.dist_utils import init_distributed, peak_memory_mib
from lib.model import make_model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=30)
    args = parser.parse_args()
    rank, local_rank, world_size = init_distributed()
    model = make_model()
    if world_size > 1:
        model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.cuda.amp.GradScaler()
    generator = torch.Generator().manual_seed(1234 + rank)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        x, y = get_batch(generator)
        with torch.cuda.amp.autocast():
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if step % 5 == 0 and rank == 0:
            torch.cuda.synchronize()
            print(f"step {step}: loss {loss.item():.6f}, {time.time() - t0:.2f}s, peak {peak_memory_mib():.1f} MiB")


if __name__ == '__main__':
    main()
