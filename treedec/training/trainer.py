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

import os
import random
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from treedec.data.synth import SynthConfig, generate_page, synth_config
from treedec.errors import UserError
from treedec.models.attention import register
from treedec.models.vlm import VLM, pixels
from treedec.page import CATEGORIES
from treedec.strategies.base import STRATEGIES
from treedec.training import distributed
from treedec.training.examples import crop_examples, misread, page_example
from treedec.training.grounding import GroundingConfig, Steer, Targets, content_rows, image_labels
from treedec.training.packing import IGNORE, pack
from treedec.training.prefetch import step_batches
from treedec.training.schedule import lr_at, stage_at


@dataclass
class TrainConfig:
    steps: int = 3000
    pages_per_step: int = 8
    strategies: list[str] = field(default_factory=lambda: ["sequential", "padoc"])
    crops_per_page: int = 1
    crop_jitter: float = 0.0  # crop box sides moved by up to this share of a grid cell, then snapped (crop_examples)
    # flat-form examples: each region of these kinds gets, with this probability, wrong content that is
    # input only, so the model learns to go on with the page after a misread (examples.misread)
    misread: float = 0.0
    misread_categories: list[str] = field(default_factory=lambda: ["equation_isolated", "table"])
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 200
    restart: int = 0  # > 0: warmup and cosine decay start again at this step (a warm restart)
    # > 0: keep every checkpoint's weights (checkpoints/step-N) and write the mean of the last `average`
    # of them as the run's model (treedec/training/average.py); the last weights go to model_last
    average: int = 0
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    bf16: bool = True
    attention: str = "tree"  # tree (tree-varlen) | dense (L x L mask reference)
    seed: int = 0
    ckpt_every: int = 200
    log_every: int = 10
    stages: list[dict[str, Any]] = field(default_factory=lambda: [{"page": {}}])
    threads: int = 2
    loader_workers: int = 0  # > 0: batches made ahead in this many forked processes (training/prefetch.py)
    device: str = "auto"  # auto (cuda when available, else cpu) | cpu | cuda | cuda:N
    start_step: int = 0  # continue a schedule from weights alone (model.path=...), e.g. without its optimizer state
    # > 0: stop after the first step that ends this many seconds into `fit`, with a checkpoint (resumable):
    # a run sized for a fixed wall-clock budget (experiments/device_train_v2.sh) ends cleanly if its pace was misjudged
    time_limit_s: float = 0.0
    # > 0: stop after this step, with a checkpoint (resumable), keeping the schedule of `steps`: a run
    # spread over sittings, or the first N steps of a long run compared with another's (probes)
    stop_after: int = 0
    grounding: GroundingConfig = field(default_factory=lambda: GroundingConfig(enabled=False))
    # MTP head training (train strategy=mtp|hpd, treedec/training/mtp.py): pages whose base hidden states are
    # computed once, rows per head step, the head's SwiGLU width
    head_pages: int = 1500
    head_batch: int = 256
    head_intermediate: int = 512

    def __post_init__(self):
        self.strategies = list(self.strategies)
        if not self.strategies:
            raise UserError("train.strategies must name at least one strategy")
        if self.average < 0:
            raise UserError(f"train.average must be 0 (off) or a number of checkpoints, got {self.average}")
        if self.time_limit_s < 0:
            raise UserError(f"train.time_limit_s must be 0 (none) or a number of seconds, got {self.time_limit_s}")
        if self.stop_after < 0:
            raise UserError(f"train.stop_after must be 0 (none) or a step, got {self.stop_after}")
        if self.loader_workers < 0:
            raise UserError(f"train.loader_workers must be 0 (batches made in-process) or more, got {self.loader_workers}")
        if not 0 <= self.misread <= 1:
            raise UserError(f"train.misread is a probability, got {self.misread}")
        self.misread_categories = list(self.misread_categories)
        unknown = sorted(set(self.misread_categories) - set(CATEGORIES))
        if unknown:
            raise UserError(f"train.misread_categories: unknown categories {unknown}; choose from {', '.join(CATEGORIES)}")
        if not 0 <= self.restart < self.steps:
            raise UserError(f"train.restart must be 0 (none) or a step below train.steps={self.steps}, got {self.restart}")
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise UserError(f"train.device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise UserError(f"train.device={self.device} but torch sees no CUDA device (torch {torch.__version__})")
        if self.attention not in ("tree", "dense"):
            raise UserError(f"train.attention must be tree or dense, got {self.attention!r}")
        if isinstance(self.grounding, dict):
            self.grounding = GroundingConfig(**self.grounding)
        if self.grounding.enabled and self.attention != "tree":
            raise UserError("train.grounding needs train.attention=tree")


def _malloc_trim():
    """glibc's malloc_trim, or None. Every step's batch has a different shape; without
    handing freed heap pages back, the process's resident memory grows over a run (measured:
    the tiny model's card)."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


class Trainer:
    def __init__(self, vlm: VLM, cfg: TrainConfig, out: Path, log=None):
        self.vlm, self.cfg, self.out = vlm, cfg, Path(out)
        self.rank, self.world, self.device = distributed.init(cfg.device)
        self.log = log
        torch.manual_seed(cfg.seed)
        if cfg.attention == "tree":
            vlm.model.model.text_model.config._attn_implementation = register()
        self.model = distributed.wrap(vlm.model.to(self.device).train(), distributed.resolve("auto", self.world),
                                      self.device, [])  # DDP under torchrun
        decay = [p for n, p in vlm.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in vlm.model.named_parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
        self.strategies = [STRATEGIES.get(n)(vlm.tokenizer) for n in cfg.strategies]
        for stage in cfg.stages:  # fail now, not hours into a run
            self._page_config(dict(stage.get("page", {})))
        self.grid = vlm.spec.image_size // vlm.spec.patch_size
        self.heads = None
        if cfg.grounding.enabled:
            if self.world > 1 and cfg.grounding.vision_warmup > 0:
                raise UserError("train.grounding.vision_warmup > 0 runs the vision tower outside DDP, so ranks would "
                                "drift apart; under torchrun set it to 0 (or warm up in one process first)")
            if vlm.spec.scale_factor != 1:
                raise UserError("train.grounding needs model.spec.scale_factor=1 (one image token per glyph cell)")
            hidden, vocab = vlm.model.config.text_config.hidden_size, vlm.model.config.text_config.vocab_size
            self.heads = torch.nn.ModuleDict({"glyph": torch.nn.Linear(hidden, vocab),
                                              "pred": torch.nn.Linear(hidden, vocab)}).to(self.device)
            self.opt.add_param_group({"params": list(self.heads.parameters()), "weight_decay": 0.0})
            self._feats: list[torch.Tensor] = []
            self._hook = vlm.model.model.connector.register_forward_hook(lambda m, i, o: self._feats.append(o))
        self.aux_stats: dict[str, float] = {}
        self.step = cfg.start_step
        self.stopped_early = False  # fit ended at train.time_limit_s, before train.steps
        self.history: list[dict[str, float]] = []

    # ------------------------------------------------------------------ data
    def _page_config(self, overrides: dict[str, Any]) -> SynthConfig:
        """Synthetic pages of a curriculum stage: its `preset` (data.synth.presets) or square pages of
        the model's image size, under the stage's other knobs."""
        size = self.vlm.spec.image_size
        try:
            return synth_config(overrides, base={"width": size, "height": size})
        except (TypeError, ValueError) as e:
            raise UserError(f"bad train.stages page config {overrides}: {e}") from None

    def batch(self, step: int):
        """This rank's share of the step's examples: packed ids/positions/labels, pixels."""
        cfg = self.cfg
        _, overrides = stage_at(step, cfg.stages)
        page_cfg = self._page_config(overrides)
        rng = random.Random(f"{cfg.seed}-{step}")
        seeds = [rng.randrange(1_000_000) for _ in range(cfg.pages_per_step)]
        examples, grounded = [], {}  # example index -> its page sample (grid-aligned pages only)
        for i, seed in enumerate(seeds):
            if i % self.world != self.rank:
                continue
            sample = generate_page(seed, page_cfg)
            grounded[len(examples)] = sample
            ex = page_example(sample, self.vlm, self.strategies[(step + i) % len(self.strategies)])
            if cfg.misread > 0:
                ex = misread(ex, self.vlm.tokenizer, random.Random(f"misread-{seed}"), cfg.misread,
                             cfg.misread_categories)
            examples.append(ex)
            examples += crop_examples(sample, self.vlm, random.Random(seed), cfg.crops_per_page, cfg.crop_jitter)
        packed = pack([e.graph for e in examples], [e.no_loss for e in examples])
        targets = self._targets(examples, grounded, packed, page_cfg) if self.heads is not None else None
        return packed, pixels([e.image for e in examples], self.vlm.spec.image_size), len(examples), targets

    def _targets(self, examples, grounded, packed, page_cfg) -> Targets:
        """Rows predicting a grounded character, the image token of its cell, and per-image labels."""
        if tuple(page_cfg.cell) != (self.vlm.spec.patch_size,) * 2:
            raise UserError(f"train.grounding needs glyph cells of the patch size: data cell {tuple(page_cfg.cell)}, "
                            f"patch {self.vlm.spec.patch_size}")
        tok, grid = self.vlm.tokenizer, self.grid
        t = Targets()
        seg = 0
        for e_idx, ex in enumerate(examples):
            g = ex.graph
            sample = grounded.get(e_idx)
            if sample is not None:
                first_image = g[0].tokens.index(tok.image_id)
                image_at = packed.tree.segments[seg].start + first_image
                for sid, i, block, j in content_rows(g, tok):
                    if (sid, i) in ex.no_loss:
                        continue
                    cells = sample.cells.get(block)
                    if cells is None or j >= len(cells) or cells[j] is None:
                        continue
                    r, c = cells[j]
                    if not (0 <= r < grid and 0 <= c < grid):
                        continue
                    t.rows.append(packed.tree.segments[seg + sid].start + i - 1)
                    t.keys.append(image_at + r * grid + c)
                    t.chars.append(g[sid].tokens[i])
                glyph, pred = image_labels(sample, tok, grid)
            else:
                glyph = torch.full((grid * grid,), tok.pad_id, dtype=torch.long)
                pred = torch.full((grid * grid,), -100, dtype=torch.long)
                glyph[:] = -100  # crops are not on the grid: no labels
            t.glyph.append(glyph)
            t.pred.append(pred)
            seg += len(g)
        return t

    # ------------------------------------------------------------------ step
    def grounding_loss(self, targets: Targets, steer: Steer | None, n_tok: int) -> tuple[torch.Tensor, dict]:
        """Glyph + predecessor losses on image tokens; steering and readout on one head. Each is a
        mean over all ranks' items, scaled to the LM loss's global token count so they weigh the
        same under sum / global tokens; under DDP the ranks' shares add up to one process's loss."""
        g = self.cfg.grounding
        feats = self._feats.pop().float().reshape(len(targets.glyph), self.grid * self.grid, -1)
        self._feats.clear()
        glyph, pred = torch.stack(targets.glyph).to(self.device).flatten(), torch.stack(targets.pred).to(self.device).flatten()
        lg = F.cross_entropy(self.heads["glyph"](feats).flatten(0, 1), glyph, ignore_index=-100, reduction="sum")
        lp = F.cross_entropy(self.heads["pred"](feats).flatten(0, 1), pred, ignore_index=-100, reduction="sum")
        counts = [int((glyph != -100).sum()), int((pred != -100).sum()), n_tok, 0, 0]
        stats = {"glyph_loss": lg.item() / max(counts[0], 1), "pred_loss": lp.item() / max(counts[1], 1)}
        ls = lr = None
        if steer is not None and steer.logp is not None:
            text = self.vlm.model.model.text_model
            attn = text.layers[g.layer].self_attn
            d = attn.head_dim
            w = attn.o_proj.weight[:, g.head * d:(g.head + 1) * d].float()
            readout = self.vlm.model.lm_head(text.norm(steer.head_out @ w.T)).float()
            chars = torch.tensor(targets.chars, device=self.device)
            ls, lr = -steer.logp.sum(), F.cross_entropy(readout, chars, reduction="sum")
            counts[3:] = [steer.logp.numel(), len(targets.chars)]
            stats.update(steer_p=steer.logp.exp().mean().item(), readout_acc=(readout.argmax(-1) == chars).float().mean().item())
        c = torch.tensor(distributed.all_sum(counts, self.device, self.world), dtype=lg.dtype, device=self.device).clamp(min=1)
        total = g.glyph * (lg / c[0] + lp / c[1])
        if ls is not None:
            total = total + g.steer * ls / c[3] + g.readout * lr / c[4]
        return total * c[2], stats

    def loss(self, packed, px, targets: Targets | None = None) -> tuple[torch.Tensor, int, int]:
        dev = self.device
        kw = dict(input_ids=packed.ids[None].to(dev), position_ids=packed.positions[None].to(dev),
                  pixel_values=px.to(dev))
        steer = None
        if self.cfg.attention == "tree":
            kw["tree"] = packed.tree
            if targets is not None and targets.rows:
                g = self.cfg.grounding
                steer = Steer(g.layer, g.head, torch.tensor(targets.rows, device=dev), torch.tensor(targets.keys, device=dev))
                kw["steer"] = steer
        else:
            dense = packed.tree.dense_mask()
            kw["attention_mask"] = torch.zeros(dense.shape).masked_fill(~dense, float("-inf"))[None, None].to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=self.cfg.bf16):
            logits = self.model(**kw).logits[0]
        logits = logits.float()
        labels = packed.labels.to(dev)
        mask = labels != IGNORE
        loss_sum = F.cross_entropy(logits[mask], labels[mask], reduction="sum")
        correct = int((logits[mask].argmax(-1) == labels[mask]).sum())
        self.aux_stats = {}
        self._lm_sum = loss_sum.item()
        if targets is not None:
            aux, self.aux_stats = self.grounding_loss(targets, steer, int(mask.sum()))
            loss_sum = loss_sum + aux
        return loss_sum, int(mask.sum()), correct

    def vision_loss(self, px, targets: Targets) -> tuple[torch.Tensor, int, int]:
        """Warm-up: glyph + predecessor losses through the vision tower only."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.bf16):
            self.vlm.model.model.get_image_features(px.to(self.device))
        aux, self.aux_stats = self.grounding_loss(targets, None, 1)
        self._lm_sum = 0.0
        return aux, 1, 0

    def train_step(self, batch: tuple | None = None) -> dict[str, float]:
        """One optimizer step on `batch` (this step's `self.batch(step)`, made here when None)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        packed, px, n_examples, targets = batch if batch is not None else self.batch(self.step)
        lr = lr_at(self.step, cfg.lr, cfg.min_lr, cfg.warmup, cfg.steps, cfg.restart)
        for group in self.opt.param_groups:
            group["lr"] = lr
        if targets is not None and self.step < cfg.grounding.vision_warmup:
            loss_sum, n_tok, correct = self.vision_loss(px, targets)
        else:
            loss_sum, n_tok, correct = self.loss(packed, px, targets)
        total = distributed.all_sum([n_tok, correct], self.device, self.world)
        # DDP averages gradients over ranks: scale so the update is sum / global tokens
        (loss_sum * self.world / total[0]).backward()
        if self.heads is not None:  # the grounding heads sit outside DDP: average them here
            distributed.average_grads(self.heads.parameters(), self.world)
        params = list(self.model.parameters()) + (list(self.heads.parameters()) if self.heads is not None else [])
        gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        lm_sum = distributed.all_sum([self._lm_sum], self.device, self.world)[0]  # the LM loss alone, comparable across runs
        dt = time.perf_counter() - t0
        return {"step": self.step, "loss": lm_sum / total[0], "token_acc": total[1] / total[0],
                "lr": lr, "grad_norm": float(gnorm), "tokens": total[0], "step_s": dt,
                "stage": stage_at(self.step - 1, cfg.stages)[0], "examples": n_examples, **self.aux_stats}

    # ------------------------------------------------------------------ checkpoints
    @property
    def ckpt_dir(self) -> Path:
        return self.out / "checkpoints" / "last"

    def save(self) -> None:
        if self.rank != 0:
            return
        tmp = self.out / "checkpoints" / "tmp"
        self.vlm.pages = asdict(self._page_config(stage_at(max(0, self.step - 1), self.cfg.stages)[1]))  # what it last saw
        self.vlm.save(tmp)
        torch.save({"step": self.step, "opt": self.opt.state_dict(), "history": self.history,
                    "torch_rng": torch.get_rng_state(),
                    "heads": self.heads.state_dict() if self.heads is not None else None}, tmp / "trainer_state.pt")
        if self.ckpt_dir.exists():
            import shutil

            shutil.rmtree(self.ckpt_dir)
        tmp.rename(self.ckpt_dir)
        if self.cfg.average > 0:
            self.vlm.save(self.out / "checkpoints" / f"step-{self.step}")

    def kept(self) -> list[Path]:
        """The weights kept at every checkpoint (`average` > 0), oldest first."""
        return sorted((self.out / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))

    def resume(self) -> bool:
        state_path = self.ckpt_dir / "trainer_state.pt"
        if not state_path.is_file():
            return False
        loaded = VLM.load(self.ckpt_dir)
        self.vlm.model.load_state_dict(loaded.model.state_dict())
        try:
            state = torch.load(state_path, weights_only=False, map_location="cpu")
            if self.heads is not None and state.get("heads"):
                self.heads.load_state_dict(state["heads"])
            self.opt.load_state_dict(state["opt"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise UserError(f"corrupt trainer state in {state_path}: {e}") from None
        self.step, self.history = state["step"], state["history"]
        torch.set_rng_state(state["torch_rng"])
        return True

    # ------------------------------------------------------------------ loop
    def _out_of_time(self, started: float) -> bool:
        """train.time_limit_s is reached (under DDP: on any rank, so that all ranks stop at one step)."""
        late = int(time.perf_counter() - started >= self.cfg.time_limit_s)
        return bool(distributed.all_max(late, self.device, self.world))

    def close(self) -> None:
        """This rank's end under torchrun (every rank calls it after `fit`): the DDP wrapper goes,
        then the process group (see `distributed.close`)."""
        self.model = distributed.unwrap(self.model)
        distributed.close(self.world)

    def fit(self, progress: bool = True) -> list[dict[str, float]]:
        from tqdm import tqdm

        bar = tqdm(total=self.cfg.steps, initial=self.step, desc="train", unit="step", disable=not progress or self.rank)
        trim = _malloc_trim()
        started = time.perf_counter()
        batches = step_batches(self.batch, self.step, self.cfg.steps, self.cfg.loader_workers)
        while self.step < self.cfg.steps:
            t0 = time.perf_counter()
            batch = next(batches)
            wait = time.perf_counter() - t0  # making the batch here, or waiting for a worker's
            row = self.train_step(batch)
            row.update(step_s=row["step_s"] + wait, batch_s=wait)
            if trim is not None:
                trim(0)
                row["rss_mb"] = _rss_mb()
            self.history.append(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", acc=f"{row['token_acc']:.3f}", lr=f"{row['lr']:.1e}")
            if self.log is not None and self.rank == 0 and (self.step % self.cfg.log_every == 0 or self.step == 1):
                self.log.log(row, step=self.step)
            saved = self.step % self.cfg.ckpt_every == 0 or self.step == self.cfg.steps
            if saved:
                self.save()
            stop_here = self.step == self.cfg.stop_after  # (a run resumed past it goes on)
            if self.step < self.cfg.steps and (stop_here or self.cfg.time_limit_s and self._out_of_time(started)):
                if not saved:
                    self.save()
                self.stopped_early = True
                break
        bar.close()
        if self.heads is not None:
            self._hook.remove()
        return self.history
