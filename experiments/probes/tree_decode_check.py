"""Part 1: Idefics3 (tiny, random) forward with pixel_values + tree-decoding equivalence.

Usage: .venv/bin/python experiments/probes/tree_decode_check.py
Checks, for attn_implementation in (eager, sdpa) and mask forms (float 0/-inf tensor,
bool tensor, dict {"full_attention": float}), that one decode step with two branches'
tokens (explicit position_ids, 4D mask over [cache + new]) gives each branch's logits as
decoding it alone from the same prefix.
"""
import copy

import torch
from transformers import DynamicCache, Idefics3ForConditionalGeneration

from treedec.models.tiny import image_prompt_ids, image_seq_len, tiny_idefics3_config, tiny_tokenizer

torch.set_num_threads(2)
torch.manual_seed(0)
tok = tiny_tokenizer()


def run(attn: str, form: str, image_size=128, patch=16, scale=2):
    cfg = tiny_idefics3_config(tok, image_size=image_size, patch_size=patch, scale_factor=scale,
                               text_layers=2, vision_layers=2, attn_implementation=attn)
    torch.manual_seed(0)
    model = Idefics3ForConditionalGeneration(cfg).eval()
    n_img = image_seq_len(image_size, patch, scale)
    prompt = image_prompt_ids(tok, n_img) + tok.encode("<BLOCK><|text|>[1,2,3,4]")
    ids = torch.tensor([prompt])
    pix = torch.randn(1, 1, 3, image_size, image_size)
    with torch.no_grad():
        cache = DynamicCache(config=cfg.text_config)
        out = model(input_ids=ids, pixel_values=pix, past_key_values=cache, use_cache=True)
        P = ids.shape[1]
        branches = [tok.encode("<CHILD>ab"), tok.encode("<CHILD>xyz1")]
        # each branch alone (plain causal, implicit positions)
        alone = []
        for b in branches:
            c = copy.deepcopy(cache)
            o = model(input_ids=torch.tensor([b]), past_key_values=c, use_cache=True)
            alone.append(o.logits[0])
        # tree step: all branch tokens at once
        flat = [t for b in branches for t in b]
        pos = [P + i for b in branches for i in range(len(b))]
        n = len(flat)
        allowed = torch.zeros(n, P + n, dtype=torch.bool)
        allowed[:, :P] = True
        s = 0
        for b in branches:
            for i in range(len(b)):
                allowed[s + i, P + s: P + s + i + 1] = True
            s += len(b)
        fmask = torch.zeros(1, 1, n, P + n).masked_fill(~allowed, float("-inf"))
        mask = {"float": fmask, "bool": allowed[None, None], "dict": {"full_attention": fmask},
                "float_min": torch.zeros(1, 1, n, P + n).masked_fill(~allowed, torch.finfo(torch.float32).min)}[form]
        c = copy.deepcopy(cache)
        kw = dict(input_ids=torch.tensor([flat]), position_ids=torch.tensor([pos]), attention_mask=mask,
                  past_key_values=c, use_cache=True)
        try:
            o = model(**kw)
        except Exception as e:  # noqa: BLE001
            return f"error: {type(e).__name__}: {str(e)[:120]}"
        tree = o.logits[0]
        d = max((tree[s:s + len(b)] - a).abs().max().item()
                for s, b, a in zip([0, len(branches[0])], branches, alone))
        return f"max|dlogit|={d:.2e}  cache_len_after={c.get_seq_length()}"


if __name__ == "__main__":
    for attn in ("eager", "sdpa"):
        for form in ("float", "float_min", "bool", "dict"):
            print(f"{attn:6s} {form:9s} {run(attn, form)}")
