"""Training PTP's placeholders on a frozen base model (`python -m treedec train strategy=ptp`).

The base model never changes and its own rows never see a placeholder, so each training
page's KV is computed once (its ground-truth graph in a strategy's form, packed
tree-varlen: a branch's rows see only its ancestors) and kept. A training step takes one
page and `head_batch` anchor rows of it; after each anchor come the K placeholders at the
anchor's position + 1..K, seeing what the anchor sees plus the earlier placeholders of
their group (the engine's draft-tree mask). Placeholder j learns the j-th token after the
anchor's next token, of the anchor's own stream. Only the placeholders' embeddings and
their row-only adapters train. Pages: seeds below 1,000,000 (`page_seeds`); checkpoints
every 200 steps in the run folder, resumed from when the same run folder is given again.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from treedec.data.synth import SynthConfig, generate_page
from treedec.models.placeholders import Placeholders, PTPConfig, decoder_linears, save_placeholders
from treedec.models.tied_weights import base_hash
from treedec.models.vlm import VLM, pixels
from treedec.strategies.base import Strategy
from treedec.training.examples import page_example
from treedec.training.packing import IGNORE, pack

HELD_OUT_SEED = 1_500_000  # teacher-forced accuracy: held-out seeds, apart from training's (below 1,000,000)


@dataclass
class PageKV:
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [1, heads, L, d] (fp16)
    visible: torch.Tensor  # [L, L] bool: row i sees row j (the packed tree)
    positions: torch.Tensor  # [L]
    labels: torch.Tensor  # [L] the token each row chooses (IGNORE: none)
    segment_end: torch.Tensor  # [L] the end (exclusive) of each row's stream segment


def page_seeds(seed: int, pages: int) -> list[int]:
    rng = random.Random(f"ptp-{seed}")
    return [rng.randrange(1_000_000) for _ in range(pages)]


def page_kv(vlm: VLM, strategy: Strategy, seed: int) -> PageKV:
    """The KV of the ground truth of the page of `seed` in `strategy`'s form."""
    e = page_example(generate_page(seed, SynthConfig(**vlm.pages)), vlm, strategy)
    return graph_kv(vlm, e.graph, e.image)


@torch.inference_mode()
def graph_kv(vlm: VLM, graph, image) -> PageKV:
    """The base model's KV over a page's graph (the prompt of `image` in its root), packed."""
    from transformers import DynamicCache

    packed = pack([graph])
    visible = packed.tree.dense_mask()
    mask = torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))
    cache = DynamicCache(config=vlm.model.config.text_config)
    vlm.model(input_ids=packed.ids[None], position_ids=packed.positions[None], attention_mask=mask[None, None],
              pixel_values=pixels([image], vlm.spec.image_size), past_key_values=cache, use_cache=True,
              logits_to_keep=1)
    end = torch.empty(len(packed.ids), dtype=torch.long)
    for s in packed.tree.segments:
        end[s.start:s.start + s.length] = s.start + s.length
    kv = [(layer.keys.half(), layer.values.half()) for layer in cache.layers]
    return PageKV(kv, visible, packed.positions, packed.labels, end)


def placeholder_batch(page: PageKV, anchors: torch.Tensor, k: int):
    """The placeholder rows after `anchors` (row indices): positions [A*K], additive mask
    [A*K, L + A*K], targets [A*K] (IGNORE past the anchor's stream)."""
    a, L = len(anchors), len(page.labels)
    j = torch.arange(1, k + 1)
    positions = (page.positions[anchors][:, None] + j).reshape(-1)
    at = anchors[:, None] + j  # the row whose label is placeholder j's target (the anchor's label: its bonus)
    ok = at < page.segment_end[anchors][:, None]
    targets = torch.where(ok, page.labels[at.clamp(max=L - 1)], IGNORE).reshape(-1)
    own = torch.block_diag(*[torch.tril(torch.ones(k, k, dtype=torch.bool))] * a)
    visible = torch.cat([page.visible[anchors].repeat_interleave(k, 0), own], 1)
    mask = torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))
    return positions, mask, targets


def placeholder_logits(vlm: VLM, ph: Placeholders, page: PageKV, anchors: torch.Tensor):
    """Logits [A*K, V] of the placeholders after `anchors`, and their targets [A*K]."""
    from transformers import DynamicCache

    k = ph.cfg.k
    positions, mask, targets = placeholder_batch(page, anchors, k)
    cache = DynamicCache(config=vlm.model.config.text_config)
    for i, (key, value) in enumerate(page.kv):
        cache.update(key.float(), value.float(), i)
    text = vlm.model.model.text_model
    embeds = ph.embed.repeat(len(anchors), 1)
    with ph.applied(vlm.model):
        out = text(inputs_embeds=embeds[None], position_ids=positions[None], attention_mask=mask[None, None],
                   past_key_values=cache, use_cache=True)
    return vlm.model.lm_head(out.last_hidden_state[0]), targets


def anchors_of(page: PageKV) -> torch.Tensor:
    return (page.labels != IGNORE).nonzero()[:, 0]


@torch.no_grad()
def depth_accuracy(vlm: VLM, ph: Placeholders, pages: list[PageKV]) -> tuple[list[float], list[float]]:
    """Per depth j: placeholder j right (teacher-forced), and placeholders 1..j all right
    (what a chain draft needs to be accepted to depth j, given the anchor's token)."""
    k = ph.cfg.k
    right, chain, total = torch.zeros(k), torch.zeros(k), torch.zeros(k)
    for page in pages:
        a = anchors_of(page)
        for at in range(0, len(a), 256):
            logits, targets = placeholder_logits(vlm, ph, page, a[at:at + 256])
            hit = (logits.argmax(-1) == targets).reshape(-1, k)
            ok = (targets != IGNORE).reshape(-1, k)
            right += (hit & ok).sum(0)
            chain += (hit & ok).cumprod(1).sum(0)
            total += ok.sum(0)
    return (right / total.clamp(min=1)).tolist(), (chain / total.clamp(min=1)).tolist()


def train(vlm: VLM, pages: list[PageKV], ph: Placeholders, steps: int, lr: float, anchors: int, seed: int,
          ckpt=None, held_out: list[PageKV] = (), progress: bool = True, stop: int | None = None) -> list[dict]:
    """AdamW on the placeholders (base frozen), warm-up then cosine to a tenth; resumes from
    and writes `ckpt` (a path) every 200 steps and at the end (`stop`: end this call after that
    step, as an interrupted run would)."""
    from tqdm import tqdm

    for p in vlm.model.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(ph.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    history, start = [], 0
    if ckpt is not None and ckpt.is_file():
        state = torch.load(ckpt)
        ph.load_state_dict(state["placeholders"])
        opt.load_state_dict(state["opt"])
        history, start = state["history"], state["step"]
    gen = torch.Generator().manual_seed(seed)
    if start:
        gen.set_state(state["gen"])
    for step in tqdm(range(start, stop or steps), desc="ptp placeholders", disable=not progress, initial=start, total=steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, (step + 1) / 100) * (0.55 + 0.45 * torch.cos(torch.tensor(step / steps * 3.14159)).item())
        page = pages[int(torch.randint(len(pages), (1,), generator=gen))]
        a = anchors_of(page)
        a = a[torch.randperm(len(a), generator=gen)[:anchors]].sort().values
        logits, targets = placeholder_logits(vlm, ph, page, a)
        loss = F.cross_entropy(logits, targets, ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ph.parameters(), 1.0)
        opt.step()
        hit = (logits.argmax(-1) == targets).reshape(-1, ph.cfg.k).float()
        ok = (targets != IGNORE).reshape(-1, ph.cfg.k)
        row = {"step": step + 1, "loss": loss.item(), "step_s": time.perf_counter() - t0,
               "acc": [round(float(hit[:, j][ok[:, j]].mean()), 4) for j in range(ph.cfg.k)]}
        if held_out and ((step + 1) % 500 == 0 or step + 1 == steps):
            row["held_out_acc"] = [round(x, 4) for x in depth_accuracy(vlm, ph, held_out)[0]]
            print(f"step {step + 1} loss {loss.item():.3f} held-out acc by depth {row['held_out_acc']}", flush=True)
        history.append(row)
        if ckpt is not None and ((step + 1) % 200 == 0 or step + 1 in (steps, stop)):
            torch.save({"placeholders": ph.state_dict(), "opt": opt.state_dict(), "history": history,
                        "step": step + 1, "gen": gen.get_state()}, ckpt)
    return history


def trains_placeholders(strategy_cfg) -> bool:
    return strategy_cfg.get("name") == "ptp"


def main(cfg, out) -> dict:
    """Train PTP placeholders on the frozen model of `model.path` (the shipped one when null);
    written to `out/ptp` (copy it beside the checkpoint as `ptp/` to have it loaded by default)."""
    from treedec.training.mtp import frozen_base

    t = cfg.train
    torch.manual_seed(int(t.seed))  # before loading, as the shipped placeholders were made
    vlm, strategies = frozen_base(cfg, "PTP's placeholders")
    text = vlm.model.config.text_config
    pcfg = PTPConfig(hidden=text.hidden_size, vocab=text.vocab_size, k=int(cfg.strategy.get("k", 6)))
    ph = Placeholders(pcfg, decoder_linears(vlm.model))
    seeds = page_seeds(int(t.seed), int(t.head_pages))
    t0 = time.perf_counter()
    pages = [page_kv(vlm, strategies[i % len(strategies)], s) for i, s in enumerate(seeds)]
    held_out = [page_kv(vlm, strategies[i % len(strategies)], HELD_OUT_SEED + i) for i in range(8)]
    kv_s = time.perf_counter() - t0
    history = train(vlm, pages, ph, int(t.steps), float(t.lr), int(t.head_batch), int(t.seed), out.dir / "ckpt.pt",
                    held_out)
    acc, chain = depth_accuracy(vlm, ph, held_out)
    figures = {"strategies": list(t.strategies), "train_pages": len(seeds), "kv_s": round(kv_s, 1),
               "train_seeds": f"page_seeds(seed={t.seed}, pages={len(seeds)}): below 1,000,000",
               "held_out_seeds": f"{HELD_OUT_SEED}-{HELD_OUT_SEED + 7}", "steps": int(t.steps), "lr": float(t.lr),
               "anchors_per_step": int(t.head_batch),
               "held_out_teacher_forced_acc_by_depth": [round(a, 4) for a in acc],
               "held_out_chain_acc_by_depth": [round(a, 4) for a in chain],
               "final_loss": sum(h["loss"] for h in history[-50:]) / len(history[-50:])}
    save_placeholders(ph, out.dir / "ptp", base_hash(vlm.model), {"training": figures})
    (out.dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    print("held-out accuracy by depth:", " ".join(f"{a:.3f}" for a in acc), "chain:", " ".join(f"{a:.3f}" for a in chain))
    return {**figures, "placeholders": str(out.dir / "ptp"),
            "params_k": sum(p.numel() for p in ph.parameters()) / 1e3}
