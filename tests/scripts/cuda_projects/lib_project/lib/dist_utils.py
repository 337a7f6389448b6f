"""Distributed set-up the way many CUDA projects write it: torchrun's variables, NCCL, one GPU per rank."""
import os

import torch
import torch.distributed as dist


def init_distributed():
    """Start NCCL under torchrun; return (rank, local_rank, world_size)."""
    if 'RANK' not in os.environ:
        return 0, 0, 1
    rank = int(os.environ['RANK'])
    local_rank = int(os.environ['LOCAL_RANK'])
    world_size = int(os.environ['WORLD_SIZE'])
    dist.init_process_group('nccl')
    torch.cuda.set_device(local_rank)
    return rank, local_rank, world_size


def peak_memory_mib():
    """Peak memory of this rank's GPU, in MiB."""
    return torch.cuda.max_memory_allocated() / 2**20
