"""What the drafter learns about one page while drafting it, handed from step to step
(never kept on the drafter: one drafter drafts many pages)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PageContext:
    ink: np.ndarray  # ink pixels of the (possibly upscaled) page
    unit: float  # the typical text line height in pixels
    leading: float = 0.0  # the usual gap between lines of a paragraph (`usual_gap`)
    med_stroke: float = 0.0  # the median stroke width of full-height lines (bold is wider)
    pitch: float | None = None  # the character pitch when the text is fixed-pitch (`fixed_pitch`)
    hard: bool = False  # the page hard-wraps its lines (`hard_wrapped`)
