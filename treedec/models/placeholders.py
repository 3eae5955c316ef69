"""PTP's learnable placeholders (Parallel-Token Prediction, arXiv 2603.15206): K input rows
appended after a token of a stream predict, in the same forward, the K tokens after that
token's successor. Placeholder j enters as id `vocab + j` and is embedded from `embed[j]`;
low-rank adapters (rank `rank`, on every linear of the decoder layers) act on placeholder
rows only, so the base model's own rows compute exactly what they compute without them.

Bound to its base model by the sha256 of the base weights (`tied_weights.base_hash`)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from treedec.models.tied_weights import TiedFiles, read_tied, save_tied

WEIGHTS, CONFIG = "placeholders.safetensors", "placeholders.json"
FILES = TiedFiles(WEIGHTS, CONFIG, "PTP placeholders", True, "python -m treedec train strategy=ptp")
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class PTPConfig:
    hidden: int
    vocab: int  # the base model's vocabulary: ids from here on are placeholders
    k: int = 6  # placeholders (look-ahead depths)
    rank: int = 8  # low-rank adapters on placeholder rows (0: embeddings only)


def decoder_linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    """The linears of the base model's text decoder layers that adapters act on."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.split(".")[-1] in TARGETS
            and ".layers." in n and "vision" not in n]


class Placeholders(nn.Module):
    def __init__(self, cfg: PTPConfig, linears: list[tuple[str, nn.Linear]]):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Parameter(torch.randn(cfg.k, cfg.hidden) * 0.02)
        self.names = [n for n, _ in linears]
        self.down = nn.ParameterList([nn.Parameter(torch.randn(m.in_features, cfg.rank) / m.in_features ** 0.5)
                                      for _, m in linears] if cfg.rank else [])
        self.up = nn.ParameterList([nn.Parameter(torch.zeros(cfg.rank, m.out_features))
                                    for _, m in linears] if cfg.rank else [])

    def embed_ids(self, embed_tokens: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        """ids [Q] (placeholders as vocab + j) -> input embeddings [Q, H]."""
        ph = ids >= self.cfg.vocab
        out = embed_tokens(ids.masked_fill(ph, 0))
        return torch.where(ph[:, None], self.embed[(ids - self.cfg.vocab).clamp(0, self.cfg.k - 1)].to(out.dtype), out)

    @contextmanager
    def applied(self, model: nn.Module, rows: torch.Tensor | None = None):
        """While inside, the adapters add to the outputs of `rows` ([Q] bool over the forward's
        flat rows; None: every row) and of no other row."""
        hooks = []
        if self.cfg.rank:
            modules = dict(model.named_modules())
            idx = None if rows is None else rows.nonzero()[:, 0]

            def hook(i):
                def add(module, args, out):
                    x = args[0]
                    if idx is None:
                        return out + (x @ self.down[i].to(x.dtype)) @ self.up[i].to(x.dtype)
                    delta = (x[:, idx] @ self.down[i].to(x.dtype)) @ self.up[i].to(x.dtype)
                    return out.index_add(1, idx, delta)
                return add

            hooks = [modules[n].register_forward_hook(hook(i)) for i, n in enumerate(self.names)]
        try:
            yield
        finally:
            for h in hooks:
                h.remove()


def save_placeholders(ph: Placeholders, directory: str | Path, base: str, extra: dict | None = None) -> Path:
    """fp16 safetensors + a JSON of the config, the adapted linears, the base hash, `extra`."""
    return save_tied(ph, directory, FILES, {"config": asdict(ph.cfg), "linears": ph.names, "base_sha256": base,
                                            **(extra or {})})


def load_placeholders(directory: str | Path, base_model: nn.Module) -> Placeholders:
    """The placeholders in `directory`; a one-line UserError when trained on other weights."""
    meta, state = read_tied(directory, FILES, base_model)
    linears = dict(decoder_linears(base_model))
    ph = Placeholders(PTPConfig(**meta["config"]), [(n, linears[n]) for n in meta["linears"]])
    ph.load_state_dict(state)
    return ph.eval().requires_grad_(False)
