"""Tree-varlen packing for Qwen3-VL: pages (each its own image) as one training sequence.

`treedec.training.packing.pack` lays the pages' ground-truth graphs out back to back and
says which ancestor prefix each stream sees (`TreeLayout`): a content branch's queries see
[image, layout<=k, own tokens]. What Qwen3-VL adds is multimodal RoPE, laid out as the
inference side (`treedec.models.qwen3_vl`) decodes a page:

- the prompt (chat template, image, mode token): the model's own `get_rope_index`
  positions (t, h, w), as `Qwen3VL.prompt` builds them;
- every token after the prompt, on the layout stream or in a branch: its 1-D graph
  position (a branch continues from its fork point, so siblings share positions; the
  `<CHILD>` takes the `<FORK>`'s position) plus the page's rope delta, on all three axes.

That is exactly what the engine feeds (1-D positions + `Prompt.position_offset`) and what
per-branch decoding (HF generate on [prompt, layout up to the fork, <CHILD>]) computes.

`PackedLM` wraps a `Qwen3VLForConditionalGeneration` so that one module's forward returns
the summed loss over supervised tokens (the LM head runs on those rows only, not on a
[L, vocab] logits tensor): the unit DDP and FSDP wrap. Attention: `tree` (tree-varlen, no
L x L mask: `treedec.models.attention.tree_attention`) or `dense` (the L x L ancestor mask
through SDPA, the reference the tests compare against).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from treedec.graph import DecodingGraph
from treedec.models.adapter import Prompt
from treedec.models.attention import TreeLayout, register
from treedec.training.packing import IGNORE, pack


@dataclass
class VLExample:
    graph: DecodingGraph  # the strategy's ground truth, rooted at `prompt.ids`
    prompt: Prompt  # from Qwen3VL.prompt: pixel_values, image_grid_thw, position_ids [4, 1, P], rope delta
    no_loss: frozenset[tuple[int, int]] = frozenset()

    @property
    def tokens(self) -> int:
        return sum(len(s.tokens) - 1 for s in self.graph.streams)


@dataclass
class VLBatch:
    ids: torch.Tensor  # [L]
    position_ids: torch.Tensor  # [3, 1, L]: t, h, w
    labels: torch.Tensor  # [L], IGNORE where no loss
    tree: TreeLayout
    pixel_values: torch.Tensor  # [patches, C*T*P*P], the pages' images in order
    image_grid_thw: torch.Tensor  # [pages, 3]

    @property
    def supervised(self) -> int:
        return int((self.labels != IGNORE).sum())

    def dense_mask(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The tree's L x L ancestor mask as an additive [1, 1, L, L] mask (reference path)."""
        m = self.tree.dense_mask()
        return torch.zeros(m.shape, dtype=dtype).masked_fill(~m, float("-inf"))[None, None]


def pack_pages(examples: list[VLExample]) -> VLBatch:
    """Pack pages: ids, labels and layout by `pack`, 3-D positions as the module docstring says."""
    p = pack([e.graph for e in examples], [e.no_loss for e in examples])
    pos = p.positions.view(1, 1, -1).repeat(3, 1, 1)  # [3, 1, L]
    seg = 0
    for e in examples:
        segs = p.tree.segments[seg:seg + len(e.graph)]
        for s in segs:  # every token of the page: graph position + the page's delta
            pos[:, 0, s.start:s.start + s.length] += e.prompt.position_offset
        root = segs[0]
        n = min(e.graph[0].prompt_len, root.length)  # prompt tokens among the root's inputs
        pos[:, 0, root.start:root.start + n] = e.prompt.inputs["position_ids"][-3:, 0, :n]
        seg += len(e.graph)
    px = torch.cat([e.prompt.inputs["pixel_values"] for e in examples])
    grid = torch.cat([e.prompt.inputs["image_grid_thw"] for e in examples])
    return VLBatch(p.ids, pos, p.labels, p.tree, px, grid)


class PackedLM(torch.nn.Module):
    """forward(batch) -> (loss summed over supervised tokens, correct argmax count)."""

    def __init__(self, model: torch.nn.Module, attention: str = "tree"):
        super().__init__()
        if attention not in ("tree", "dense"):
            raise ValueError(f"attention must be tree or dense, got {attention!r}")
        self.model, self.attention = model, attention
        # the text model's attention only: the vision tower keeps its own (per-image varlen) kernel
        model.model.language_model.config._attn_implementation = register()

    def forward(self, ids, position_ids, labels, pixel_values, image_grid_thw, tree: TreeLayout | None = None,
                attention_mask: torch.Tensor | None = None):
        out = self.model.model(input_ids=ids[None], position_ids=position_ids, pixel_values=pixel_values,
                               image_grid_thw=image_grid_thw, attention_mask=attention_mask, tree=tree, use_cache=False)
        h = out.last_hidden_state[0]
        keep = labels != IGNORE
        logits = self.model.lm_head(h[keep]).float()
        target = labels[keep]
        return F.cross_entropy(logits, target, reduction="sum"), (logits.argmax(-1) == target).sum()

    def batch_inputs(self, batch: VLBatch, device: torch.device) -> dict:
        """The forward's keyword arguments for `batch` on `device`."""
        kw = dict(ids=batch.ids.to(device), position_ids=batch.position_ids.to(device), labels=batch.labels.to(device),
                  pixel_values=batch.pixel_values.to(device), image_grid_thw=batch.image_grid_thw.to(device))
        if self.attention == "tree":
            kw["tree"] = batch.tree
        else:
            kw["attention_mask"] = batch.dense_mask().to(device)
        return kw
