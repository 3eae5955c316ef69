"""The training loop: packed synthetic pages -> a tiny document VLM.

Each step draws `pages_per_step` synthetic pages (seeds are a function of the run seed
and the step, so a resumed run sees the same data), turns each into one example of the
configured strategies' ground-truth graphs (alternating) plus `crops_per_page` region crops, packs
them into one sequence (tree-varlen attention, or the dense-mask reference path) and
takes one AdamW step. Checkpoints go to `out/checkpoints/last` and a killed run resumes
from there; under torchrun (gloo/nccl) the pages of a step are split across ranks and
the loss is normalized by the global token count, so the update equals one process's.
"""
from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from treedec.data.synth import SynthConfig, generate_page
from treedec.errors import UserError
from treedec.models.attention import register
from treedec.models.vlm import VLM, pixels
from treedec.strategies.base import STRATEGIES
from treedec.training.examples import crop_examples, page_example
from treedec.training.packing import IGNORE, pack
from treedec.training.schedule import lr_at, stage_at


@dataclass
class TrainConfig:
    steps: int = 3000
    pages_per_step: int = 8
    strategies: list[str] = field(default_factory=lambda: ["sequential", "padoc"])
    crops_per_page: int = 1
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 200
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    bf16: bool = True
    attention: str = "tree"  # tree (tree-varlen) | dense (L x L mask reference)
    seed: int = 0
    ckpt_every: int = 200
    log_every: int = 10
    stages: list[dict[str, Any]] = field(default_factory=lambda: [{"page": {}}])
    threads: int = 2

    def __post_init__(self):
        self.strategies = list(self.strategies)
        if not self.strategies:
            raise UserError("train.strategies must name at least one strategy")
        if self.attention not in ("tree", "dense"):
            raise UserError(f"train.attention must be tree or dense, got {self.attention!r}")


def _dist() -> tuple[int, int]:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo" if not torch.cuda.is_available() else "nccl")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Trainer:
    def __init__(self, vlm: VLM, cfg: TrainConfig, out: Path, log=None):
        self.vlm, self.cfg, self.out = vlm, cfg, Path(out)
        self.rank, self.world = _dist()
        self.log = log
        torch.manual_seed(cfg.seed)
        if cfg.attention == "tree":
            vlm.model.model.text_model.config._attn_implementation = register()
        self.model = vlm.model.train()
        if self.world > 1:
            self.model = torch.nn.parallel.DistributedDataParallel(self.model)
        decay = [p for n, p in vlm.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in vlm.model.named_parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
        self.strategies = [STRATEGIES.get(n)(vlm.tokenizer) for n in cfg.strategies]
        self.step = 0
        self.history: list[dict[str, float]] = []

    # ------------------------------------------------------------------ data
    def batch(self, step: int):
        """This rank's share of the step's examples: packed ids/positions/labels, pixels."""
        cfg = self.cfg
        _, overrides = stage_at(step, cfg.stages)
        page_cfg = SynthConfig(**{**dict(width=self.vlm.spec.image_size, height=self.vlm.spec.image_size), **overrides})
        rng = random.Random(f"{cfg.seed}-{step}")
        seeds = [rng.randrange(1_000_000) for _ in range(cfg.pages_per_step)]
        examples = []
        for i, seed in enumerate(seeds):
            if i % self.world != self.rank:
                continue
            sample = generate_page(seed, page_cfg)
            examples.append(page_example(sample, self.vlm, self.strategies[(step + i) % len(self.strategies)]))
            examples += crop_examples(sample, self.vlm, random.Random(seed), cfg.crops_per_page)
        packed = pack([e.graph for e in examples])
        return packed, pixels([e.image for e in examples], self.vlm.spec.image_size), len(examples)

    # ------------------------------------------------------------------ step
    def loss(self, packed, px) -> tuple[torch.Tensor, int, int]:
        kw = dict(input_ids=packed.ids[None], position_ids=packed.positions[None], pixel_values=px)
        if self.cfg.attention == "tree":
            kw["tree"] = packed.tree
        else:
            dense = packed.tree.dense_mask()
            kw["attention_mask"] = torch.zeros(dense.shape).masked_fill(~dense, float("-inf"))[None, None]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.bf16):
            logits = self.model(**kw).logits[0]
        logits = logits.float()
        mask = packed.labels != IGNORE
        loss_sum = F.cross_entropy(logits[mask], packed.labels[mask], reduction="sum")
        correct = int((logits[mask].argmax(-1) == packed.labels[mask]).sum())
        return loss_sum, int(mask.sum()), correct

    def train_step(self) -> dict[str, float]:
        cfg = self.cfg
        t0 = time.perf_counter()
        packed, px, n_examples = self.batch(self.step)
        lr = lr_at(self.step, cfg.lr, cfg.min_lr, cfg.warmup, cfg.steps)
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss_sum, n_tok, correct = self.loss(packed, px)
        total = torch.tensor([n_tok, correct], dtype=torch.float64)
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(total)
        # DDP averages gradients over ranks: scale so the update is sum / global tokens
        (loss_sum * self.world / total[0]).backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        loss_val = torch.tensor([loss_sum.item()], dtype=torch.float64)
        if self.world > 1:
            import torch.distributed as dist

            dist.all_reduce(loss_val)
        dt = time.perf_counter() - t0
        return {"step": self.step, "loss": float(loss_val[0] / total[0]), "token_acc": float(total[1] / total[0]),
                "lr": lr, "grad_norm": float(gnorm), "tokens": float(total[0]), "step_s": dt,
                "stage": stage_at(self.step - 1, cfg.stages)[0], "examples": n_examples}

    # ------------------------------------------------------------------ checkpoints
    @property
    def ckpt_dir(self) -> Path:
        return self.out / "checkpoints" / "last"

    def save(self) -> None:
        if self.rank != 0:
            return
        tmp = self.out / "checkpoints" / "tmp"
        self.vlm.save(tmp)
        torch.save({"step": self.step, "opt": self.opt.state_dict(), "history": self.history,
                    "torch_rng": torch.get_rng_state()}, tmp / "trainer_state.pt")
        if self.ckpt_dir.exists():
            import shutil

            shutil.rmtree(self.ckpt_dir)
        tmp.rename(self.ckpt_dir)

    def resume(self) -> bool:
        state_path = self.ckpt_dir / "trainer_state.pt"
        if not state_path.is_file():
            return False
        loaded = VLM.load(self.ckpt_dir)
        self.vlm.model.load_state_dict(loaded.model.state_dict())
        try:
            state = torch.load(state_path, weights_only=False)
            self.opt.load_state_dict(state["opt"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise UserError(f"corrupt trainer state in {state_path}: {e}") from None
        self.step, self.history = state["step"], state["history"]
        torch.set_rng_state(state["torch_rng"])
        return True

    # ------------------------------------------------------------------ loop
    def fit(self, progress: bool = True) -> list[dict[str, float]]:
        from tqdm import tqdm

        bar = tqdm(total=self.cfg.steps, initial=self.step, desc="train", unit="step", disable=not progress or self.rank)
        while self.step < self.cfg.steps:
            row = self.train_step()
            self.history.append(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", acc=f"{row['token_acc']:.3f}", lr=f"{row['lr']:.1e}")
            if self.log is not None and self.rank == 0 and (self.step % self.cfg.log_every == 0 or self.step == 1):
                self.log.log(row, step=self.step)
            if self.step % self.cfg.ckpt_every == 0 or self.step == self.cfg.steps:
                self.save()
        bar.close()
        return self.history
