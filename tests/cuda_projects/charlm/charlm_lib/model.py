"""A character model: embeddings, one causal self-attention block, a head."""
import torch
import torch.nn as nn
from torch.nn import functional as F


class CharLM(nn.Module):
    def __init__(self, vocab, block, width, fast_attention):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.fast_attention = fast_attention
        self.register_buffer("mask", torch.triu(torch.ones(block, block, device="cuda", dtype=torch.bool), 1))

    def forward(self, idx, targets=None):
        t = idx.size(1)
        x = self.emb(idx) + self.pos(torch.arange(t, device="cuda"))
        x = x + self.attn(x, x, x, attn_mask=self.mask[:t, :t], need_weights=False)[0]
        logits = self.head(x)
        loss = None if targets is None else F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss
