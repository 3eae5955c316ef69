"""Reading probe: train a tiny Idefics3 from scratch to read random strings.

.venv/bin/python experiments/probes/train_reading.py --name NAME [--minutes 15 ...]
Logs experiments/probes/runs/NAME.csv (one row per eval) and NAME.log.
Curriculum: levels 0..3 (see reading_data.sample_page); the level advances when the
rolling teacher-forced content accuracy at the current level exceeds --advance.
Eval (fixed seed 1234 held-out pages): teacher-forced content char acc, and greedy
per-region decoding given the image + gold layout prefix up to that region's <CHILD>
(the PaDoc/HPD branch setting): char error rate (edit distance / length) and exact match.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
from reading_data import render, sample_page, target_segments  # noqa: E402
from transformers import DynamicCache, Idefics3ForConditionalGeneration  # noqa: E402

from treedec.models.tiny import image_prompt_ids, image_seq_len, tiny_idefics3_config, tiny_tokenizer  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--minutes", type=float, default=15)
p.add_argument("--grid", type=int, default=16)
p.add_argument("--cell", type=int, default=16)
p.add_argument("--font", type=int, default=13)
p.add_argument("--patch", type=int, default=16)
p.add_argument("--scale", type=int, default=1)
p.add_argument("--vh", type=int, default=192)
p.add_argument("--vl", type=int, default=2)
p.add_argument("--th", type=int, default=256)
p.add_argument("--tl", type=int, default=4)
p.add_argument("--bs", type=int, default=16)
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--wd", type=float, default=0.01)
p.add_argument("--warmup", type=int, default=200)
p.add_argument("--total-steps", type=int, default=6000, help="cosine horizon")
p.add_argument("--start-level", type=int, default=0)
p.add_argument("--level-init", type=int, default=None, help="initial level (default: --start-level)")
p.add_argument("--max-level", type=int, default=3)
p.add_argument("--advance", type=float, default=0.9)
p.add_argument("--eval-every", type=float, default=150, help="seconds")
p.add_argument("--bf16", action="store_true")
p.add_argument("--seed", type=int, default=0)
p.add_argument("--init", default="", help="state dict to start from")
p.add_argument("--aux", type=float, default=0.0, help="weight of per-image-token glyph + predecessor losses")
p.add_argument("--tie", action="store_true", help="tie input embeddings and LM head")
p.add_argument("--attn-sup", type=int, default=-1, help="decoder layer whose head 0 is trained to attend to the cell being read (-1: off)")
p.add_argument("--attn-w", type=float, default=1.0)
p.add_argument("--pretrain-steps", type=int, default=0, help="first steps: vision aux losses only (level>=2 pages)")
p.add_argument("--glyph-head", action="store_true", help="separate training-only glyph head instead of lm_head")
p.add_argument("--readout-sup", type=float, default=0.0,
               help="weight of a CE loss reading the char from the supervised head's output (o_proj slice -> norm -> lm_head)")
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--threads", type=int, default=2)
args = p.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)
rng = random.Random(args.seed)
out_dir = HERE / "runs"
out_dir.mkdir(exist_ok=True)
ckpt_dir = Path("/tmp/treedec_probe")
ckpt_dir.mkdir(exist_ok=True)
log = open(out_dir / f"{args.name}.log", "a")


def say(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


tok = tiny_tokenizer()
size = args.grid * args.cell
cfg = tiny_idefics3_config(tok, image_size=size, patch_size=args.patch, scale_factor=args.scale,
                           vision_hidden=args.vh, vision_layers=args.vl, vision_heads=max(1, args.vh // 64),
                           text_hidden=args.th, text_layers=args.tl,
                           attn_implementation="eager" if args.attn_sup >= 0 else "sdpa")
if args.attn_sup >= 0:
    cfg.text_config._attn_implementation = "eager"
if args.tie:
    cfg.tie_word_embeddings = cfg.text_config.tie_word_embeddings = True
model = Idefics3ForConditionalGeneration(cfg)
if args.tie:
    model.lm_head.weight = model.model.text_model.embed_tokens.weight
# training-only head (not part of the served model): predecessor-in-reading-order of each cell
pred_head = torch.nn.Linear(args.th, cfg.text_config.vocab_size, bias=False)
glyph_head = torch.nn.Linear(args.th, cfg.text_config.vocab_size, bias=False) if args.glyph_head else None
if args.init:
    model.load_state_dict(torch.load(args.init))
    aux_path = Path(args.init).with_suffix(".aux.pt")
    if aux_path.exists():
        st = torch.load(aux_path)
        pred_head.load_state_dict(st["pred_head"])
        if glyph_head and st["glyph_head"]:
            glyph_head.load_state_dict(st["glyph_head"])
n_img = image_seq_len(size, args.patch, args.scale)
prompt = image_prompt_ids(tok, n_img)
say(json.dumps(vars(args)), f"params={sum(p.numel() for p in model.parameters()) / 1e6:.2f}M image_tokens={n_img}")


def to_pix(imgs):
    x = torch.from_numpy(np.stack(imgs)).float().div(255).sub(0.5).div(0.5)
    return x[:, None, None].expand(-1, 1, 3, -1, -1).contiguous()


def make_example(regions):
    ids, lab, cont = list(prompt), [-100] * len(prompt), [0] * len(prompt)
    qk = []
    for r, (lay, text) in zip(regions, target_segments(regions, args.grid)):
        a, b = tok.encode(lay), tok.encode(text)
        s0 = len(ids) + len(a)
        for i in range(len(b)):  # the query predicting char i sits at s0 + i - 1 and should read its cell
            qk.append((s0 + i - 1, 2 + (r.cy + i // r.w) * args.grid + r.cx + i % r.w))
        ids += a + b
        lab += a + b
        cont += [0] * len(a) + [1] * len(b)
    ids.append(tok.eos_id)
    lab.append(tok.eos_id)
    cont.append(0)
    QK.append(qk)
    return ids, lab, cont


def make_batch(levels, r):
    pages = [sample_page(r, args.grid, lv) for lv in levels]
    imgs = [render(pg, args.grid, args.cell, args.font) for pg in pages]
    QK.clear()
    exs = [make_example(pg) for pg in pages]
    qk = list(QK)
    L = max(len(e[0]) for e in exs)
    ids = torch.full((len(exs), L), tok.pad_id)
    lab = torch.full((len(exs), L), -100)
    cont = torch.zeros((len(exs), L), dtype=torch.bool)
    for i, (a, b, c) in enumerate(exs):
        ids[i, :len(a)] = torch.tensor(a)
        lab[i, :len(b)] = torch.tensor(b)
        cont[i, :len(c)] = torch.tensor(c, dtype=torch.bool)
    pages = Pages(pages)
    pages.qk = qk
    return pages, to_pix(imgs), ids, lab, cont


class Pages(list):
    qk: list


QK: list = []


def cell_labels(pages):
    """per image token (row-major cells; scale 1 only): glyph id (pad for blank) and predecessor id."""
    g = args.grid
    glyph = torch.full((len(pages), g * g), tok.pad_id)
    pred = torch.full((len(pages), g * g), -100)
    for b, pg in enumerate(pages):
        for r in pg:
            ids = tok.encode(r.text)
            for i, t in enumerate(ids):
                j = (r.cy + i // r.w) * g + r.cx + i % r.w
                glyph[b, j] = t
                pred[b, j] = ids[i - 1] if i else tok.child_id
    return glyph, pred


AUX = {}
HOOK = {}
if args.attn_sup >= 0 and args.readout_sup > 0:
    _attn = model.model.text_model.layers[args.attn_sup].self_attn
    _attn.o_proj.register_forward_hook(lambda mod, inp, out: HOOK.__setitem__("x", inp[0]))


def forward_loss(pix, ids, lab, cont, pages=None, vision_only=False):
    if vision_only:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            feats = model.model.get_image_features(pix, return_dict=True)
        emb = feats.pooler_output.float().view(len(pages), -1, args.th)
        glyph, pred = cell_labels(pages)
        lg = (glyph_head or model.lm_head)(emb).float()
        la = F.cross_entropy(lg.flatten(0, 1), glyph.flatten())
        lp = F.cross_entropy(pred_head(emb).float().flatten(0, 1), pred.flatten(), ignore_index=-100)
        gm = glyph != tok.pad_id
        AUX["glyph"], AUX["pred"] = round(la.item(), 3), round(lp.item(), 3)
        AUX["glyph_acc"] = round((lg.argmax(-1)[gm] == glyph[gm]).float().mean().item(), 3)
        return la + lp, 0, 0, 0
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
        if (args.aux > 0 or args.attn_sup >= 0) and pages is not None:
            feats = model.model.get_image_features(pix, return_dict=True)
            o = model(input_ids=ids, mm_encoder_outputs={"image": feats}, use_cache=False,
                      output_attentions=args.attn_sup >= 0)
            logits = o.logits
            if args.attn_sup >= 0:
                att = o.attentions[args.attn_sup][:, 0].float()  # (B, Lq, Lk), head 0
                bi = torch.tensor([b for b, q in enumerate(pages.qk) for _ in q])
                qi = torch.tensor([x[0] for q in pages.qk for x in q])
                ki = torch.tensor([x[1] for q in pages.qk for x in q])
                pa = att[bi, qi, ki]
                AUX["attn_p"] = round(pa.mean().item(), 3)
                la_att = -(pa + 1e-6).log().mean()
                if args.readout_sup > 0:
                    hd = cfg.text_config.head_dim
                    h0 = HOOK["x"][bi, qi, :hd].float() @ _attn.o_proj.weight[:, :hd].float().t()
                    rl = model.lm_head(model.model.text_model.norm(h0)).float()
                    tgt_r = lab[bi, qi + 1]
                    la_att = la_att + args.readout_sup * F.cross_entropy(rl, tgt_r)
                    AUX["readout_acc"] = round((rl.argmax(-1) == tgt_r).float().mean().item(), 3)
            emb = feats.pooler_output.float().view(len(pages), -1, args.th)
            glyph, pred = cell_labels(pages)
            la = F.cross_entropy((glyph_head or model.lm_head)(emb).float().flatten(0, 1), glyph.flatten())
            lp = F.cross_entropy(pred_head(emb).float().flatten(0, 1), pred.flatten(), ignore_index=-100)
            AUX["glyph"], AUX["pred"] = la.item(), lp.item()
        else:
            logits = model(input_ids=ids, pixel_values=pix, use_cache=False).logits
    logits = logits[:, :-1].float()
    tgt, c = lab[:, 1:], cont[:, 1:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
    pred = logits.argmax(-1)
    ok = (pred == tgt)
    if (args.aux > 0 or args.attn_sup >= 0) and pages is not None:
        AUX["lm"] = round(loss.item(), 3)
        AUX["glyph"], AUX["pred"] = round(AUX["glyph"], 3), round(AUX["pred"], 3)
        loss = loss + args.aux * (la + lp)
        if args.attn_sup >= 0:
            loss = loss + args.attn_w * la_att
    return loss, ok[c].float().sum().item(), c.sum().item(), (tgt != -100).sum().item()


def edit(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


@torch.no_grad()
def greedy_eval(pages, pix):
    model.eval()
    errs = chars = exact = n = 0
    stop = {tok.eos_id, tok.block_id}
    for i, pg in enumerate(pages):
        pre = list(prompt)
        for lay, text in target_segments(pg, args.grid):
            pre += tok.encode(lay)
            cache = DynamicCache(config=cfg.text_config)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                o = model(input_ids=torch.tensor([pre]), pixel_values=pix[i:i + 1], past_key_values=cache, use_cache=True)
            out = []
            nxt = o.logits[0, -1].argmax().item()
            while nxt not in stop and len(out) < len(text) + 8:
                out.append(nxt)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                    o = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True)
                nxt = o.logits[0, -1].argmax().item()
            hyp = tok.decode(out)
            errs += edit(hyp, text)
            chars += len(text)
            exact += hyp == text
            n += 1
            pre += tok.encode(text)
    model.train()
    return errs / max(chars, 1), exact / max(n, 1)


@torch.no_grad()
def tf_eval(batch):
    model.eval()
    _, pix, ids, lab, cont = batch
    _, ok, nc, _ = forward_loss(pix, ids, lab, cont)
    model.train()
    return ok / max(nc, 1)


eval_sets = {lv: make_batch([lv] * 24, random.Random(1234 + lv)) for lv in (1, 3)}
opt = torch.optim.AdamW(list(model.parameters()) + list(pred_head.parameters())
                        + (list(glyph_head.parameters()) if glyph_head else []), lr=args.lr, weight_decay=args.wd, betas=(0.9, 0.98))


def lr_at(step):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = min(1.0, (step - args.warmup) / max(1, args.total_steps - args.warmup))
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


csv_path = out_dir / f"{args.name}.csv"
fields = ["step", "wall_s", "train_s", "level", "lr", "loss", "train_tf_acc", "steps_per_s", "tok_per_s",
          "eval_tf_l1", "eval_tf_l3", "greedy_cer_l1", "greedy_exact_l1", "greedy_cer_l3", "greedy_exact_l3"]
csv_f = open(csv_path, "w", newline="")
wr = csv.DictWriter(csv_f, fieldnames=fields)
wr.writeheader()
level = args.start_level if args.level_init is None else args.level_init
roll = deque(maxlen=40)
losses = deque(maxlen=40)
t0 = time.time()
train_s = 0.0
last_eval = time.time()
step = 0
ntok = 0
win_t, win_steps, win_tok = 0.0, 0, 0
model.train()
while True:
    pre = step < args.pretrain_steps
    levels = [max(2, level) if pre else level if rng.random() < 0.75 or level == args.start_level else rng.randrange(args.start_level, level)
              for _ in range(args.bs)]
    batch = make_batch(levels, rng)
    ts = time.time()
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    loss, ok, nc, nt = forward_loss(*batch[1:], pages=batch[0], vision_only=pre)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    AUX["gnorm"] = round(float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)), 2)
    opt.step()
    dt = time.time() - ts
    train_s += dt
    win_t += dt
    win_steps += 1
    win_tok += batch[2].numel()
    step += 1
    if not pre:
        roll.append(ok / max(nc, 1))
    losses.append(loss.item())
    if level < args.max_level and len(roll) == roll.maxlen and np.mean(roll) > args.advance:
        level += 1
        roll.clear()
        say(f"step {step} t={time.time() - t0:.0f}s -> level {level}")
    done = time.time() - t0 > args.minutes * 60
    if step % 20 == 0:
        say(f"step {step} t={time.time() - t0:.0f}s lvl={level} loss={np.mean(losses):.3f} tf_acc={np.mean(roll) if roll else 0:.3f} lr={lr_at(step):.2e} {win_steps / win_t:.2f} step/s aux={AUX}")
    if time.time() - last_eval > args.eval_every or done:
        ev = {}
        for lv, b in eval_sets.items():
            ev[f"eval_tf_l{lv}"] = tf_eval(b)
            cer, ex = greedy_eval(b[0][:12], b[1][:12])
            ev[f"greedy_cer_l{lv}"], ev[f"greedy_exact_l{lv}"] = cer, ex
        row = dict(step=step, wall_s=round(time.time() - t0, 1), train_s=round(train_s, 1), level=level,
                   lr=lr_at(step), loss=round(float(np.mean(losses)), 4), train_tf_acc=round(float(np.mean(roll)) if roll else 0, 4),
                   steps_per_s=round(win_steps / win_t, 3), tok_per_s=round(win_tok / win_t, 1),
                   **{k: round(v, 4) for k, v in ev.items()})
        wr.writerow(row)
        csv_f.flush()
        say("EVAL", json.dumps(row))
        win_t, win_steps, win_tok = 0.0, 0, 0
        torch.save(model.state_dict(), ckpt_dir / f"{args.name}.pt")
        torch.save({"pred_head": pred_head.state_dict(), "glyph_head": glyph_head.state_dict() if glyph_head else None,
                    "opt": opt.state_dict(), "step": step, "level": level}, ckpt_dir / f"{args.name}.aux.pt")
        last_eval = time.time()
    if done:
        break
say("done")
