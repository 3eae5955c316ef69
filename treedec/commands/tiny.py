"""`python -m treedec tiny model_type=NAME [format=NAME] out=DIR`: a tiny random replica of a
real VLM architecture (`treedec.models.replicas`), written to `out`, read back by the loader
to prove it loads."""
from __future__ import annotations

from treedec.models.loader import load_model
from treedec.models.replicas import build_replica
from treedec.run.outputs import RunOutput


def main(cfg, out: RunOutput) -> dict:
    path = build_replica(str(cfg.model_type), out.dir, cfg.get("format"), int(cfg.seed))
    vlm = load_model(path, fmt=cfg.get("format"))
    params = sum(p.numel() for p in vlm.model.parameters())
    print(f"tiny {cfg.model_type} ({params / 1e6:.2f} M parameters, vocabulary {len(vlm.tokenizer)}) in {path}; "
          f"try: python -m treedec check model.path={path}")
    return {"model_type": str(cfg.model_type), "format": cfg.get("format"), "path": str(path), "params": params,
            "vocabulary": len(vlm.tokenizer), "treedec_tokens": vlm.tokenizer.treedec_tokens}
