"""Named page distributions: `data.page.preset=NAME` (knobs set beside it override it).

- `base`: SynthConfig's own defaults (384 x 512 pages, 8 x 16 px glyph cells, 3-8 regions).
- `v1`: the pages the shipped tiny_v1 model was trained on (its treedec.json `pages`):
  256 px squares of 16 px glyph cells, 1-4 short regions.
- `v2`: pages calibrated to the real OmniDocBench demo pages (`experiments/page_stats.py`
  prints both side by side): regions per page and content tokens per region by kind inside the
  real pages' interquartile ranges, oracle padoc reduction within 0.05 of theirs.
- `v2_model`: what model v2 reads (tiny_v2): v2's regions, kinds and columns on a 640 px page
  of 16 px glyph cells (one glyph per ViT patch), text and tables shorter in proportion.
"""
from __future__ import annotations

V1 = {"width": 256, "height": 256, "cell": (16, 16), "margin": 1, "regions": (1, 4), "columns": "mixed",
      "text_mode": "mixed", "para_words": (1, 10), "wrap": "hard",
      "kinds": {"text_block": 0.5, "title": 0.2, "table": 0.12, "equation_isolated": 0.08, "figure": 0.1},
      "table_rows": (2, 3), "table_cols": (2, 3), "merge_prob": 0.3, "furniture_prob": 0.4}

V2 = {"width": 768, "height": 1024, "cell": (8, 16), "margin": 2, "regions": (4, 20), "columns": "mixed",
      "two_column_prob": 0.5, "text_mode": "mixed", "para_words": (5, 45), "title_words": (1, 3),
      "caption_words": (0, 2), "wrap": "word",
      "kinds": {"text_block": 0.62, "title": 0.2, "table": 0.07, "equation_isolated": 0.04, "figure": 0.07},
      "table_rows": (6, 14), "table_cols": (4, 7), "merge_prob": 0.3, "furniture_prob": 0.6}

V2_MODEL = {**V2, "width": 640, "height": 640, "cell": (16, 16), "margin": 1, "wrap": "hard",
            "regions": (6, 14), "para_words": (6, 18), "table_rows": (3, 6), "table_cols": (2, 4)}

PRESETS: dict[str, dict] = {"base": {}, "v1": V1, "v2": V2, "v2_model": V2_MODEL}
