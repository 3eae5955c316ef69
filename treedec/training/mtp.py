"""Training HPD's MTP head on a frozen base model (`python -m treedec train strategy=hpd`).

The base model never changes, so its hidden states are computed once: synthetic pages
(the model's page distribution, seeds drawn as the base trainer draws them: below
1,000,000, disjoint from the held-out evaluation seeds from 1,000,000) are turned into the
strategies' ground-truth graphs, packed tree-varlen (a branch's rows see only its
ancestors, so a branch drafts from its own context) and run through the base model once;
every generated row keeps its last-layer hidden state and the next k + 1 tokens of its own
stream. The head then trains on those rows alone: depth d reads the previous depth's
state and the embedding of the token before its target, with HPD's progressive weights
over depths (`depth_weights`).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from treedec.data.synth import SynthConfig, generate_page
from treedec.models.adapter import capture_hidden
from treedec.errors import UserError
from treedec.models.attention import register
from treedec.models.mtp_head import MTPConfig, MTPHead, depth_weights
from treedec.models.vlm import VLM, pixels
from treedec.strategies.base import Strategy
from treedec.training.examples import page_example
from treedec.training.packing import pack

IGNORE = -100


@dataclass
class Rows:
    hidden: torch.Tensor  # [R, H] the base model's hidden state at each generated row (fp16)
    window: torch.Tensor  # [R, k + 1] the stream's next tokens after the row (IGNORE past its end)

    def __len__(self) -> int:
        return len(self.hidden)


def page_seeds(seed: int, pages: int) -> list[int]:
    rng = random.Random(f"mtp-{seed}")
    return [rng.randrange(1_000_000) for _ in range(pages)]


@torch.inference_mode()
def collect_rows(vlm: VLM, strategies: list[Strategy], seeds: list[int], k: int, pages_per_forward: int = 8,
                 progress: bool = True) -> Rows:
    """The base model's hidden states over the ground truth of the pages of `seeds`
    (strategies alternating), one packed tree-varlen forward per `pages_per_forward` pages."""
    from tqdm import tqdm

    page_cfg = SynthConfig(**vlm.pages)
    text = vlm.model.model.text_model.config
    before, text._attn_implementation = text._attn_implementation, register()
    hidden, windows = [], []
    try:
        for at in tqdm(range(0, len(seeds), pages_per_forward), desc="base hidden states", disable=not progress):
            examples = []
            for i, seed in enumerate(seeds[at:at + pages_per_forward]):
                sample = generate_page(seed, page_cfg)
                examples.append(page_example(sample, vlm, strategies[(at + i) % len(strategies)]))
            packed = pack([e.graph for e in examples])
            with capture_hidden(vlm.model) as cap:
                vlm.model(input_ids=packed.ids[None], position_ids=packed.positions[None], tree=packed.tree,
                          pixel_values=pixels([e.image for e in examples], vlm.spec.image_size), logits_to_keep=0)
            rows = cap.rows[0].float()
            seg = 0
            for e in examples:
                for s in e.graph.streams:
                    start = packed.tree.segments[seg].start
                    seg += 1
                    first = max(s.prompt_len - 1, 0)  # the row that chose the stream's first generated token
                    for j in range(first, len(s.tokens) - 1):
                        w = s.tokens[j + 1:j + k + 2]
                        windows.append(w + [IGNORE] * (k + 1 - len(w)))
                    hidden.append(rows[start + first:start + len(s.tokens) - 1].half())
    finally:
        text._attn_implementation = before
    return Rows(torch.cat(hidden), torch.tensor(windows, dtype=torch.long))


def train_head(vlm: VLM, rows: Rows, cfg: MTPConfig, steps: int, lr: float, batch: int = 256, seed: int = 0,
               progress: bool = True, log=None) -> tuple[MTPHead, list[dict]]:
    """Train a head on `rows` (base frozen); HPD's progressive weights over depths."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    head = MTPHead(cfg)
    embed, lm_head = vlm.model.get_input_embeddings(), vlm.model.get_output_embeddings()
    for p in vlm.model.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    history = []
    gen = torch.Generator().manual_seed(seed)
    bar = tqdm(range(steps), desc="mtp head", disable=not progress)
    for step in bar:
        t0 = time.perf_counter()
        for g in opt.param_groups:  # warm-up, then cosine to a tenth
            g["lr"] = lr * min(1.0, (step + 1) / 100) * (0.55 + 0.45 * torch.cos(torch.tensor(step / steps * 3.14159)).item())
        idx = torch.randint(0, len(rows), (batch,), generator=gen)
        h, win = rows.hidden[idx].float(), rows.window[idx]
        weights = depth_weights(cfg.k, step / max(1, steps - 1))
        total, stats = 0.0, {}
        for d in range(cfg.k):
            if weights[d] == 0:  # not yet in the curriculum (later depths neither)
                break
            prev, target = win[:, d], win[:, d + 1]
            ok = (prev != IGNORE) & (target != IGNORE)
            h, y = head(h, embed(prev.clamp(min=0)))
            if not ok.any():
                continue
            logits = lm_head(y[ok])
            loss = F.cross_entropy(logits, target[ok])
            total = total + weights[d] * loss
            stats[f"acc{d + 1}"] = float((logits.argmax(-1) == target[ok]).float().mean())
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        row = {"step": step + 1, "loss": total.item(), "step_s": time.perf_counter() - t0, **stats}
        history.append(row)
        if log is not None and (step + 1) % 50 == 0:
            log.log(row, step=step + 1)
        bar.set_postfix(loss=f"{row['loss']:.3f}", acc1=f"{stats.get('acc1', 0):.3f}")
    return head.eval(), history


@torch.inference_mode()
def depth_accuracy(vlm: VLM, head: MTPHead, rows: Rows) -> list[float]:
    """Teacher-forced accuracy per depth: the chain's token d is right given the true tokens
    before it (an upper bound of greedy acceptance, which needs every earlier depth right)."""
    embed, lm_head = vlm.model.get_input_embeddings(), vlm.model.get_output_embeddings()
    h, win = rows.hidden.float(), rows.window
    out = []
    for d in range(head.cfg.k):
        prev, target = win[:, d], win[:, d + 1]
        ok = (prev != IGNORE) & (target != IGNORE)
        h, y = head(h, embed(prev.clamp(min=0)))
        out.append(float((lm_head(y[ok]).argmax(-1) == target[ok]).float().mean()) if ok.any() else 0.0)
    return out


HELD_OUT_SEED = 1_500_000  # teacher-forced accuracy during training: held-out seeds apart from run's (1,000,000 on)


def trains_head(strategy_cfg) -> bool:
    """`train strategy=mtp|hpd` (or a strategy with `mtp: true`) trains the MTP head only."""
    return strategy_cfg.get("name") in ("mtp", "hpd") or bool(strategy_cfg.get("mtp"))


def frozen_base(cfg, what: str) -> tuple[VLM, list[Strategy]]:
    """The trained checkpoint of `model.path` (the shipped one when null), in eval mode, and
    the strategies of `train.strategies`: what `what` (an MTP head, PTP's placeholders) trains on."""
    from treedec.models.loader import checkpoint_path
    from treedec.strategies.base import STRATEGIES

    torch.set_num_threads(int(cfg.train.threads))
    path = checkpoint_path(cfg.model)
    if path is None:
        raise UserError(f"{what} is trained on a trained checkpoint's frozen model: give model.path=DIR (or "
                        "model=tiny for the shipped one), not model=random")
    vlm = VLM.load(path)
    vlm.model.eval()
    return vlm, [STRATEGIES.get(n)(vlm.tokenizer) for n in cfg.train.strategies]


def main(cfg, out) -> dict:
    """Train the MTP head on the frozen model of `model.path` (the shipped one when null);
    written to `out/mtp` (copy it beside the checkpoint as `mtp/` to have it loaded by default)."""
    from treedec.models.mtp_head import save_head
    from treedec.models.tied_weights import base_hash

    t = cfg.train
    vlm, strategies = frozen_base(cfg, "an MTP head")
    k = int(cfg.strategy.get("k", 6))
    mcfg = MTPConfig(hidden=vlm.model.config.text_config.hidden_size, intermediate=int(t.head_intermediate), k=k)
    seeds = page_seeds(int(t.seed), int(t.head_pages))
    cache = out.dir / "rows.pt"  # the base model's rows: rerunning with other head settings skips the forwards
    if cache.is_file():
        rows = Rows(**torch.load(cache))
    else:
        rows = collect_rows(vlm, strategies, seeds, k)
        torch.save({"hidden": rows.hidden, "window": rows.window}, cache)
    held_out = collect_rows(vlm, strategies, list(range(HELD_OUT_SEED, HELD_OUT_SEED + 8)), k, progress=False)
    head, history = train_head(vlm, rows, mcfg, int(t.steps), float(t.lr), int(t.head_batch), int(t.seed))
    acc = depth_accuracy(vlm, head, held_out)
    figures = {"strategies": list(t.strategies), "train_pages": len(seeds), "train_rows": len(rows),
               "train_seeds": f"page_seeds(seed={t.seed}, pages={len(seeds)}): below 1,000,000",
               "held_out_seeds": f"{HELD_OUT_SEED}-{HELD_OUT_SEED + 7}", "steps": int(t.steps), "lr": float(t.lr),
               "held_out_teacher_forced_acc_by_depth": [round(a, 4) for a in acc],
               "final_loss": sum(h["loss"] for h in history[-50:]) / len(history[-50:])}
    save_head(head, out.dir / "mtp", base_hash(vlm.model), {"training": figures})
    import json

    (out.dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    print("held-out teacher-forced accuracy by depth:", " ".join(f"{a:.3f}" for a in acc))
    return {**figures, "head": str(out.dir / "mtp"), "params_m": sum(p.numel() for p in head.parameters()) / 1e6}
