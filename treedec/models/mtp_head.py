"""HPD's P-MTP head: one attention-free module applied K times on top of a frozen base model.

Depth k reads the previous depth's state h (the base model's last-layer hidden state at
depth 1) and the embedding of the token before the one it predicts:
`x = fc(cat[norm(h), norm(emb(prev))])`, `h' = x + SwiGLU(norm(x))`, logits =
`lm_head(norm(h'))` with the base model's own embedding and LM head (shared, frozen). h'
feeds depth k + 1. Trained with HPD's progressive weighting (easy-to-hard: the weight of
depth k grows from 0 to 1 over training, `depth_weights`).

The head records the sha256 of the base weights it was trained on (`tied_weights.base_hash`) and
refuses to load on other weights.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from treedec.models.tied_weights import TiedFiles, read_tied, save_tied

WEIGHTS, CONFIG = "mtp_head.safetensors", "mtp_head.json"
FILES = TiedFiles(WEIGHTS, CONFIG, "MTP head", False, "python -m treedec train strategy=hpd")


@dataclass
class MTPConfig:
    hidden: int
    intermediate: int = 512
    k: int = 6  # look-ahead depths drafted
    eps: float = 1e-5


class MTPHead(nn.Module):
    def __init__(self, cfg: MTPConfig):
        super().__init__()
        self.cfg = cfg
        d, m = cfg.hidden, cfg.intermediate
        self.norm_h, self.norm_e = nn.RMSNorm(d, eps=cfg.eps), nn.RMSNorm(d, eps=cfg.eps)
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.norm_x, self.norm_out = nn.RMSNorm(d, eps=cfg.eps), nn.RMSNorm(d, eps=cfg.eps)
        self.gate, self.up = nn.Linear(d, m, bias=False), nn.Linear(d, m, bias=False)
        self.down = nn.Linear(m, d, bias=False)

    def forward(self, h: torch.Tensor, prev_emb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One depth. h, prev_emb: [..., H] -> (state for the next depth [..., H], normed
        output for the shared LM head [..., H])."""
        x = self.fc(torch.cat([self.norm_h(h), self.norm_e(prev_emb)], -1))
        y = self.norm_x(x)
        x = x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))
        return x, self.norm_out(x)


def depth_weights(k: int, progress: float) -> list[float]:
    """HPD's progressive (easy-to-hard) weights over depths 1..k at `progress` in [0, 1] of
    training: depth 1 weighs 1 throughout; depth j enters once progress passes (j-1)/k and
    reaches 1 linearly by j/k, so the head learns near look-ahead first."""
    return [1.0 if j == 0 else min(1.0, max(0.0, progress * k - (j - 1))) for j in range(k)]


class MTPDraftModel:
    """A head bound to its base model's embedding and LM head: greedy K-token chains."""

    def __init__(self, head: MTPHead, embed: nn.Module, lm_head: nn.Module):
        self.head, self.embed, self.lm_head = head.eval(), embed, lm_head

    @classmethod
    def of(cls, head: MTPHead, base: nn.Module) -> "MTPDraftModel":
        return cls(head, base.get_input_embeddings(), base.get_output_embeddings())

    @torch.inference_mode()
    def chain(self, hidden: torch.Tensor, last: int, k: int | None = None) -> list[int]:
        """The k tokens after `last` (the token the base model chose from `hidden` [H])."""
        return self.chains(hidden, last, k)[0]

    @torch.inference_mode()
    def chains(self, hidden: torch.Tensor, last: int, k: int | None = None, top: int = 1) -> list[list[int]]:
        """`top` chains of k tokens after `last`: the head's `top` likeliest first tokens, each
        continued greedily (top=1: HPD's single chain)."""
        return self.chains_many(hidden[None], [last], k, top)[0]

    @torch.inference_mode()
    def chains_many(self, hidden: torch.Tensor, last: list[int], k: int | None = None, top: int = 1
                    ) -> list[list[list[int]]]:
        """`chains` for n streams at once, one batched head pass per depth: hidden [n, H],
        last: n tokens -> per stream, its `top` chains."""
        dtype = self.lm_head.weight.dtype
        n = len(last)
        h, y = self.head(hidden.to(dtype), self.embed(torch.tensor(last)).to(dtype))
        prev = self.lm_head(y).topk(top).indices.reshape(n * top)  # stream-major: stream i's alternatives
        rest = self.greedy_logits(h.repeat_interleave(top, 0), prev, (k or self.head.cfg.k) - 1)
        rows = torch.stack([prev] + [logits.argmax(-1) for logits in rest], 1).tolist()  # [n * top, k]
        return [rows[i * top:(i + 1) * top] for i in range(n)]

    def greedy_logits(self, h: torch.Tensor, prev: torch.Tensor, depths: int) -> list[torch.Tensor]:
        """The head continued greedily for `depths` depths from states h [n, H] after tokens
        prev [n]: each depth's logits [n, V] (its argmax feeds the next depth)."""
        dtype = self.lm_head.weight.dtype
        out = []
        for _ in range(depths):
            h, y = self.head(h, self.embed(prev).to(dtype))
            out.append(self.lm_head(y))
            prev = out[-1].argmax(-1)
        return out


def save_head(head: MTPHead, directory: str | Path, base: str, extra: dict | None = None) -> Path:
    """fp16 safetensors + a JSON of its config, its base model's hash and `extra` figures."""
    return save_tied(head, directory, FILES, {"config": asdict(head.cfg), "base_sha256": base, **(extra or {})})


def load_head(directory: str | Path, base_model: nn.Module) -> MTPHead:
    """The head in `directory`; a one-line UserError when it was trained on other weights."""
    meta, state = read_tied(directory, FILES, base_model)
    head = MTPHead(MTPConfig(**meta["config"]))
    head.load_state_dict(state)
    return head.to(next(base_model.parameters()).dtype)
