"""A single-file GPT trainer written for one NVIDIA GPU or a torchrun job of them, in the style of nanoGPT's train.py.

Written for this repository (no third-party code): the shape of the well-known script, not its text. It
hard-codes the three things such scripts hard-code: ``device = 'cuda'``, ``backend = 'nccl'`` and the
autocast dtype chosen from ``torch.cuda``. ``cuda_style_trainer_ported.py`` is this file with exactly those
lines replaced by ``rt`` calls (tests/test_cuda_style_port.py checks the diff); it runs on any device ezpz
picks. Data is random tokens, so the run needs no download.
"""
import argparse
import math
import os
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
# config
parser = argparse.ArgumentParser()
parser.add_argument('--max-iters', type=int, default=50)
parser.add_argument('--batch-size', type=int, default=8)
parser.add_argument('--block-size', type=int, default=32)
parser.add_argument('--n-layer', type=int, default=2)
parser.add_argument('--n-head', type=int, default=2)
parser.add_argument('--n-embd', type=int, default=64)
parser.add_argument('--vocab-size', type=int, default=128)
parser.add_argument('--learning-rate', type=float, default=1e-3)
parser.add_argument('--log-interval', type=int, default=5)
parser.add_argument('--eval-interval', type=int, default=0)  # evaluate and checkpoint every N iterations; 0: never
parser.add_argument('--eval-iters', type=int, default=2)
parser.add_argument('--out-dir', default='out')
config = parser.parse_args()
device = 'cuda'  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1'
backend = 'nccl'  # 'nccl', 'gloo', etc.
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
# -----------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


# various inits, derived attributes, I/O setup
ddp = int(os.environ.get('RANK', -1)) != -1  # is this a ddp run?
if ddp:
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    ddp_rank, ddp_world_size = dist.get_rank(), dist.get_world_size()
    master_process = ddp_rank == 0
else:
    ddp_rank, ddp_world_size, master_process = 0, 1, True
torch.manual_seed(1337 + ddp_rank)
device_type = torch.device(device).type  # for later use in torch.autocast
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.autocast(device_type=device_type, dtype=ptdtype)


def get_batch():
    data = torch.randint(config.vocab_size, (config.batch_size, config.block_size + 1))
    x, y = data[:, :-1], data[:, 1:]
    return x.to(device), y.to(device)


model = GPT(config.vocab_size, config.block_size, config.n_layer, config.n_head, config.n_embd).to(device)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
if ddp:
    model = nn.parallel.DistributedDataParallel(model)
if master_process:
    print(f"device {device} backend {backend} dtype {dtype}")



@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = torch.zeros(config.eval_iters)
    for k in range(config.eval_iters):
        X, Y = get_batch()
        with ctx:
            logits, loss = model(X, Y)
        losses[k] = loss.item()
    model.train()
    return losses.mean()


t0 = time.time()
for iter_num in range(1, config.max_iters + 1):
    lr = config.learning_rate * 0.5 * (1 + math.cos(math.pi * iter_num / config.max_iters))  # cosine decay
    for group in optimizer.param_groups:
        group['lr'] = lr
    if config.eval_interval and iter_num % config.eval_interval == 0 and master_process:
        val_loss = estimate_loss()
        print(f"step {iter_num}: val loss {val_loss:.4f}")
        raw_model = model.module if ddp else model
        checkpoint = {'model': raw_model.state_dict(), 'optimizer': optimizer.state_dict(), 'iter_num': iter_num,
                      'config': vars(config)}
        os.makedirs(config.out_dir, exist_ok=True)
        torch.save(checkpoint, os.path.join(config.out_dir, 'ckpt.pt'))
        print(f"saving checkpoint to {config.out_dir}")
    X, Y = get_batch()
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if master_process and (iter_num % config.log_interval == 0 or iter_num == config.max_iters):
        print(f"iter {iter_num}: loss {loss.item():.4f}, time {(time.time() - t0) * 1000:.0f}ms")
        t0 = time.time()
if ddp:
    dist.destroy_process_group()
