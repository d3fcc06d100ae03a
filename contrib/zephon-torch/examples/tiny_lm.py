"""A tiny causal transformer LM for CPU experiments on packed rows.

It reads exactly what a packed Zephon microbatch provides: ``input_ids``, ``position_ids``
(restarting in every packed document) and ``document_ids`` (attention stays inside a document,
causally), and is scored against ``labels`` (``-100`` where no next token should be predicted).

To run a few hundred steps on two CPU cores, the GPT-2 vocabulary is cut to its first
``vocab_size`` ids (BPE ids are roughly ordered by merge frequency); every rarer id shares the last
slot. The model never sees anything else about the data, so any difference between runs comes
from which rows it was given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class TinyLMConfig:
    """Model size; defaults train at roughly 0.1 s per 512-token microbatch on one CPU core."""

    vocab_size: int = 8192
    seq_len: int = 128
    dim: int = 64
    heads: int = 4
    layers: int = 2


class Block(nn.Module):
    """Pre-norm attention + MLP."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, 4 * cfg.dim), nn.GELU(), nn.Linear(4 * cfg.dim, cfg.dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Token + position embeddings, ``layers`` blocks, output tied to the token embedding."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos = nn.Embedding(cfg.seq_len, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.dim)
        # small embeddings (GPT-2's 0.02): with the tied output, unit-variance ones give huge initial logits
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def clip(self, ids: torch.Tensor) -> torch.Tensor:
        """GPT-2 ids to the model's vocabulary (rare ids share the last slot)."""
        return ids.long().clamp(max=self.cfg.vocab_size - 1)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, document_ids: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[1]
        x = self.tok(self.clip(input_ids)) + self.pos(position_ids.long())
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        # padding (document -1) attends to padding, so no row is fully masked (that would be NaN)
        mask = (document_ids[:, :, None] == document_ids[:, None, :]) & causal
        mask = mask[:, None]
        for block in self.blocks:
            x = block(x, mask)
        return self.ln(x) @ self.tok.weight.T


def summed_token_loss(model: nn.Module, mb: dict[str, torch.Tensor], vocab_size: int) -> torch.Tensor:
    """Sum (not mean) of the next-token cross-entropy over the microbatch's valid labels.

    Summing lets the caller divide by the token count of the whole *global* batch, which is what
    makes a step's update independent of how the batch is split over ranks and microbatches.
    """
    logits = model(mb["input_ids"], mb["position_ids"], mb["document_ids"])
    labels = mb["labels"].long()
    labels = torch.where(labels >= 0, labels.clamp(max=vocab_size - 1), labels)
    return F.cross_entropy(
        logits.reshape(-1, vocab_size).float(), labels.reshape(-1), ignore_index=-100, reduction="sum"
    )
