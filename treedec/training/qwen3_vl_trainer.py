"""Fine-tuning a Qwen3-VL checkpoint with tree-varlen packing (PaDoc / HPD training).

Each step takes `pages_per_step` pages (synthetic pages drawn per step, a fixed pool of
them, or an OmniDocBench-format folder), turns each into the ground-truth graph of one of
`train.strategies` (alternating) rooted at the inference prompt, splits this rank's pages
into micro-batches by sequence length (`bucket_tokens`: pages sorted by packed length,
filled greedily, so a micro-batch holds pages of similar length), packs each micro-batch
(`qwen3_vl_packing.pack_pages`) and takes one AdamW step on the sum of all micro-batches'
losses over the global supervised token count: the same update whatever the number of
processes and micro-batches. Every rank runs the same number of micro-batches (ranks with
fewer repeat their last with weight 0), as DDP's and FSDP's collectives require.

On CUDA the forward runs under bf16 autocast (weights and optimizer state fp32); on the
CPU everything is fp32. Gradient checkpointing is HF's (non-reentrant).

Every checkpoint (`train.ckpt_every`, and the last step) is the model folder `out/model`
plus `trainer_state.pt` beside it (the optimizer's state keyed by parameter name, the step,
the history, the RNG); rerunning the same command with the same `out` resumes from it.
"""
from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from treedec.data.synth import SynthConfig
from treedec.errors import UserError
from treedec.formats.declare import declare_format
from treedec.models.qwen3_vl import Qwen3VL
from treedec.strategies.base import STRATEGIES
from treedec.training import distributed
from treedec.training.qwen3_vl_examples import omnidocbench_pages, page_example, synthetic_pages
from treedec.training.qwen3_vl_packing import PackedLM, VLExample, pack_pages
from treedec.training.schedule import lr_at, stage_at


STATE = "trainer_state.pt"


@dataclass
class FinetuneConfig:
    """Backbone-specific training knobs (`model.finetune` in conf/model/qwen3_vl.yaml)."""
    parallel: str = "auto"  # auto (ddp under torchrun, else none) | none | ddp | fsdp
    grad_checkpointing: bool = False
    bucket_tokens: int = 16384  # most packed tokens per micro-batch (a longer page is a micro-batch alone)
    data: str = "synth"  # synth | omnidocbench
    data_root: str | None = None  # omnidocbench: the folder (one JSON, images in images/)
    data_json: str | None = None
    pool: int = 0  # synth: > 0 takes every step's pages from this many fixed pages (seeds seed..seed+pool-1)
    freeze_vision: bool = False
    page: dict[str, Any] = field(default_factory=dict)  # synth: SynthConfig overrides under train.stages'

    def __post_init__(self):
        self.page = dict(self.page)
        distributed.resolve(self.parallel, 1)
        if self.data not in ("synth", "omnidocbench"):
            raise UserError(f"model.finetune.data must be synth or omnidocbench, got {self.data!r}")
        if self.data == "omnidocbench" and not self.data_root:
            raise UserError("model.finetune.data=omnidocbench needs model.finetune.data_root=DIR")
        if self.bucket_tokens < 1:
            raise UserError(f"model.finetune.bucket_tokens must be >= 1, got {self.bucket_tokens}")


def buckets(examples: list[VLExample], limit: int) -> list[list[VLExample]]:
    """Micro-batches of at most `limit` packed tokens, pages of similar length together."""
    out: list[list[VLExample]] = []
    size = 0
    for e in sorted(examples, key=lambda e: -e.tokens):
        if out and size + e.tokens <= limit:
            out[-1].append(e)
            size += e.tokens
        else:
            out.append([e])
            size = e.tokens
    return out


class VLTrainer:
    def __init__(self, vlm: Qwen3VL, cfg, fcfg: FinetuneConfig, log=None):
        if cfg.grounding.enabled or cfg.average > 0 or cfg.misread > 0:
            raise UserError("train.grounding, train.average and train.misread are for treedec's tiny VLM; "
                            "leave them off for a Qwen3-VL checkpoint")
        self.vlm, self.cfg, self.fcfg, self.log = vlm, cfg, fcfg, log
        self.rank, self.world, self.device = distributed.init(cfg.device)
        self.parallel = distributed.resolve(fcfg.parallel, self.world)
        if self.parallel == "fsdp" and self.world == 1:
            distributed.solo_group(self.device)
        if cfg.pages_per_step < self.world:
            raise UserError(f"train.pages_per_step={cfg.pages_per_step} is below the {self.world} processes")
        torch.manual_seed(cfg.seed)
        model = vlm.model.float().to(self.device).train()
        if fcfg.grad_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if fcfg.freeze_vision:
            model.model.visual.requires_grad_(False)
        self.packed = PackedLM(model, cfg.attention)
        units = [*model.model.language_model.layers, *model.model.visual.blocks]
        self.module = distributed.wrap(self.packed, self.parallel, self.device, units)
        params = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW([{"params": [p for n, p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
                                      {"params": [p for n, p in params if p.ndim < 2], "weight_decay": 0.0}],
                                     lr=cfg.lr, betas=(0.9, 0.95))
        self.strategies = [STRATEGIES.get(n)(vlm.tokenizer) for n in cfg.strategies]
        self.pool = omnidocbench_pages(fcfg.data_root, fcfg.data_json) if fcfg.data == "omnidocbench" else None
        if fcfg.data == "synth" and fcfg.pool > 0:
            self.pool = synthetic_pages(range(cfg.seed, cfg.seed + fcfg.pool), self.page_config(0))
        self.step = cfg.start_step
        self.history: list[dict[str, float]] = []

    def page_config(self, step: int) -> SynthConfig:
        overrides = {**self.fcfg.page, **stage_at(step, self.cfg.stages)[1]}
        try:
            return SynthConfig(**overrides)
        except (TypeError, ValueError) as e:
            raise UserError(f"bad synthetic page config {overrides}: {e}") from None

    def examples(self, step: int) -> list[VLExample]:
        """This rank's pages of `step` (a function of the seed and the step: resumable, rank-split)."""
        rng = random.Random(f"{self.cfg.seed}-{step}")
        n = self.cfg.pages_per_step
        if self.pool is not None:
            at = rng.randrange(len(self.pool))  # n consecutive pages of the pool (all of it when n >= pool)
            samples = [self.pool[(at + i) % len(self.pool)] for i in range(n)]
        else:
            samples = synthetic_pages([rng.randrange(1_000_000) for _ in range(n)], self.page_config(step))
        return [page_example(self.vlm, s.page, s.image, self.strategies[(step + i) % len(self.strategies)])
                for i, s in enumerate(samples) if i % self.world == self.rank]

    def train_step(self) -> dict[str, float]:
        cfg, dev = self.cfg, self.device
        t0 = time.perf_counter()
        examples = self.examples(self.step)
        micro = [pack_pages(b) for b in buckets(examples, self.fcfg.bucket_tokens)]
        n_tok = sum(b.supervised for b in micro)
        total, n_micro = distributed.all_sum([n_tok], dev, self.world)[0], distributed.all_max(len(micro), dev, self.world)
        lr = lr_at(self.step, cfg.lr, cfg.min_lr, cfg.warmup, cfg.steps, cfg.restart)
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss_sum = correct = 0.0
        for i in range(n_micro):
            weight = 1.0 if i < len(micro) else 0.0  # a rank with fewer micro-batches repeats its last, unweighted
            batch = micro[min(i, len(micro) - 1)]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cfg.bf16 and dev.type == "cuda"):
                loss, right = self.module(**self.packed.batch_inputs(batch, dev))
            # DDP and FSDP average gradients over ranks: scale so the update is sum / global tokens
            (loss * (weight * self.world / total)).backward()
            loss_sum += weight * loss.item()
            correct += weight * int(right)
        gnorm = torch.nn.utils.clip_grad_norm_([p for p in self.module.parameters() if p.grad is not None], cfg.grad_clip)
        if hasattr(gnorm, "full_tensor"):  # a DTensor under FSDP
            gnorm = gnorm.full_tensor()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        loss_sum, correct = distributed.all_sum([loss_sum, correct], dev, self.world)
        return {"step": self.step, "loss": loss_sum / total, "token_acc": correct / total, "lr": lr,
                "grad_norm": float(gnorm), "tokens": total, "micro_batches": n_micro,
                "step_s": time.perf_counter() - t0}

    def close(self) -> None:
        """This rank's end (every rank calls it after `fit`): the DDP wrapper goes, then the process
        group (see `distributed.close`). Under FSDP the group's gloo threads outlive this: FSDP's
        mesh infos hold the group while the model lives, and even with the model released and
        torch's DTensor caches cleared, references from outside Python's containers (none that
        `gc.get_referrers` finds) keep it, so this leaves the model to the caller."""
        self.module = distributed.unwrap(self.module)
        distributed.close(self.world)

    def fit(self, out: Path | None = None, progress: bool = True) -> list[dict[str, float]]:
        from tqdm import tqdm

        bar = tqdm(total=self.cfg.steps, initial=self.step, desc="train", unit="step", disable=not progress or self.rank)
        while self.step < self.cfg.steps:
            row = self.train_step()
            self.history.append(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", acc=f"{row['token_acc']:.3f}")
            if self.log is not None and self.rank == 0 and (self.step % self.cfg.log_every == 0 or self.step == 1):
                self.log.log(row, step=self.step)
            if out is not None and (self.step % self.cfg.ckpt_every == 0 or self.step == self.cfg.steps):
                self.save(Path(out) / "model")
        bar.close()
        return self.history

    def resume(self, directory: Path) -> bool:
        """Go on from `save(directory)`'s trainer state (the model's weights were loaded from
        `directory` by the caller): optimizer, step, history and RNG. False when there is none."""
        path = Path(directory) / STATE
        if not path.is_file():
            return False
        try:
            state = torch.load(path, weights_only=False, map_location="cpu")
            distributed.load_optimizer_state(self.module, self.opt, state["opt"])
        except (RuntimeError, KeyError, ValueError, EOFError) as e:
            raise UserError(f"corrupt trainer state in {path}: {e}") from None
        self.step, self.history = state["step"], state["history"]
        torch.set_rng_state(state["torch_rng"])
        return True

    def save(self, directory: Path) -> None:
        """The model as a checkpoint folder `Qwen3VL.load` (and `run model.path=...`) reads: weights
        (unsharded), config, tokenizer with its chat template, image processor config, and the
        trainer's state. Every rank must call it (gathering FSDP shards is a collective); rank 0
        writes the folder beside `directory` and swaps it in, so a killed save leaves the last one."""
        state = distributed.full_state_dict(self.packed, self.parallel)
        opt = distributed.full_optimizer_state(self.module, self.opt, self.parallel)
        if self.rank != 0:
            return
        state = {k.removeprefix("model."): v for k, v in state.items()}
        final = Path(directory)
        d, old = final.with_name(final.name + ".tmp"), final.with_name(final.name + ".old")
        shutil.rmtree(d, ignore_errors=True)
        self.vlm.model.save_pretrained(d, state_dict=state)
        hf = self.vlm.tokenizer.hf
        hf.save_pretrained(d)
        self.vlm.image_processor.save_pretrained(d)
        declare_format(d, "treedec")  # what it is trained to write (`treedec.formats.declare`)
        if self.vlm.chat_template and not hf.chat_template:
            (d / "chat_template.jinja").write_text(self.vlm.chat_template)
        torch.save({"opt": opt, "step": self.step, "history": self.history, "torch_rng": torch.get_rng_state()}, d / STATE)
        if final.exists():
            final.replace(old)
        d.replace(final)
        shutil.rmtree(old, ignore_errors=True)
