"""What HF's masked SDPA path costs an engine step on a CPU: K/V repeated per query head (a
copy of a layer's whole KV, at every layer and step) against the engine's own path, which reads
the shared KV heads in place (`treedec.models.attention.engine_attention`, `enable_gqa`).

    python experiments/gqa_step.py --size 0.1b --keys 4900 9752 14084 --threads 2

Prints, per KV length (one page, one row, a dense step: `treedec.cost_model.step_probe`), the
median CPU seconds of a step each way, timed in turn in one process (`treedec.cost_model._timed`).
Both give the same logits, bit for bit (tests/test_page_attention.py)."""
from __future__ import annotations

import argparse
import contextlib
import json

import torch

import treedec.models.adapter  # noqa: F401  (the module whose step calls engine_attention)
import treedec.models.attention as attention
from treedec.cost_model import _timed, step_probe
from treedec.models.forced import ForcedModel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="0.1b")
    ap.add_argument("--keys", type=int, nargs="+", default=[4900, 9752, 14084])
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of timing (all probes in turn)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    adapter = ForcedModel(a.size).adapter()
    engine_path = attention.engine_attention

    def hf_path(config):  # the model's own implementation (sdpa): K/V repeated per query head
        return contextlib.nullcontext()

    probes, names = [], []
    for keys in a.keys:
        step, _ = step_probe(adapter, 1, a.rows, keys, dense_waste=99.0)
        for name, path in (("engine", engine_path), ("hf_repeat", hf_path)):
            def run(step=step, path=path):
                attention.engine_attention = path
                try:
                    step()
                finally:
                    attention.engine_attention = engine_path
            probes.append(run)
            names.append((keys, name))
    times = _timed(probes, torch.device("cpu"), a.budget)
    out = {}
    for (keys, name), t in zip(names, times):
        out.setdefault(str(keys), {})[f"{name}_cpu_s"] = round(t, 4)
    for v in out.values():
        v["ratio"] = round(v["hf_repeat_cpu_s"] / v["engine_cpu_s"], 2)
    print(json.dumps({"size": a.size, "rows": a.rows, "threads": a.threads, "by_keys": out}, indent=1))


if __name__ == "__main__":
    main()
