"""Degraded drafts, for HSD's robustness comparison (`strategy.draft_noise`): a copy of a
draft page whose content is edited at a given character rate, as a worse pipeline OCR would
misread it. Boxes, categories and reading order are kept; tables and formulas are edited as
text (a tag may break, as a pipeline's may). Seeded by the page's name: a rerun gives the same
drafts."""
from __future__ import annotations

import copy
import random

from treedec.page import Page


def degrade(page: Page, rate: float, name: str) -> Page:
    """`page` with each content character, at probability `rate`, replaced, deleted or followed
    by an inserted character (equal odds), the new characters drawn from the page's own."""
    if rate == 0:
        return page
    rng = random.Random(f"draft_noise:{rate}:{name}")
    alphabet = sorted({ch for b in page.blocks for ch in b.content}) or ["x"]
    out = copy.deepcopy(page)
    for b in out.blocks:
        text = []
        for ch in b.content:
            if rng.random() >= rate:
                text.append(ch)
                continue
            edit = rng.randrange(3)
            if edit == 0:
                text.append(rng.choice(alphabet))
            elif edit == 2:
                text += [ch, rng.choice(alphabet)]
        b.content = "".join(text)
    return out
