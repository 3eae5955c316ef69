"""Remake tests/assets/vllm_tiny: a tiny treedec VLM overfit on two synthetic pages so
that, greedy, it forks (`padoc`: `<BLOCK>...<FORK>` per block, then content branches) and
writes content (`sequential`). Used by tests/test_vllm_backend.py to check that
runtime=vllm and runtime=embedded give the same pages; its quality is not the point.

    .venv/bin/python tests/assets/make_vllm_fixture.py   # 400 steps, ~7 min on 2 CPU cores (token_acc 1.0 from ~step 120)

Writes the checkpoint with `VLM.save` (weights + tokenizer + the serving files vLLM reads).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch


from treedec.data.synth import SynthConfig, generate_page  # noqa: E402
from treedec.models.vlm import VLM, VLMSpec, pixels  # noqa: E402
from treedec.training.examples import page_example  # noqa: E402
from treedec.training.packing import pack  # noqa: E402
from treedec.training.trainer import TrainConfig, Trainer  # noqa: E402

OUT = Path(__file__).resolve().parent / "vllm_tiny"
SPEC = VLMSpec(image_size=128, patch_size=16, scale_factor=2, vision_hidden=96, vision_layers=1, vision_heads=3,
               text_hidden=64, text_layers=2, head_dim=32, max_positions=1024)
PAGE = SynthConfig(width=128, height=128, cell=(8, 8), margin=1, regions=(2, 3), para_words=(2, 6),
                   furniture_prob=0.0, kinds={"text_block": 0.5, "title": 0.3, "equation_isolated": 0.2})
SEEDS = (1, 4)
STEPS = 400


def pages():
    return [generate_page(seed, PAGE) for seed in SEEDS]


class FixedPages(Trainer):
    """The project's trainer on the same pages every step (each page under every strategy)."""

    def batch(self, step: int):
        examples = [page_example(s, self.vlm, st) for s in pages() for st in self.strategies]
        return pack([e.graph for e in examples]), pixels([e.image for e in examples], self.vlm.spec.image_size), \
            len(examples)


def main() -> None:
    torch.set_num_threads(2)
    vlm = VLM.tiny(SPEC, seed=0)
    cfg = TrainConfig(steps=STEPS, strategies=["sequential", "padoc"], crops_per_page=0, lr=3e-3, min_lr=3e-4,
                      warmup=20, bf16=False, ckpt_every=10**9, log_every=50)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = FixedPages(vlm, cfg, Path(tmp))
        trainer.save = lambda: None  # only the final weights are kept, below
        trainer.fit(progress=True)
    last = trainer.history[-1]
    print(f"loss {last['loss']:.4f} token_acc {last['token_acc']:.4f}")
    vlm.model.model.text_model.config._attn_implementation = "sdpa"
    vlm.model.eval()
    if OUT.exists():
        shutil.rmtree(OUT)
    vlm.save(OUT)
    print("wrote", OUT, sum(f.stat().st_size for f in OUT.iterdir()) // 1024, "KiB")


if __name__ == "__main__":
    main()
