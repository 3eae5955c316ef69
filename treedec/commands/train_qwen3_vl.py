"""`python -m treedec train model=qwen3_vl model.path=DIR`: fine-tune a Qwen3-VL checkpoint with
tree-varlen packing (`treedec.training.qwen3_vl_trainer`); torchrun for several processes.
Writes the fine-tuned checkpoint to `out/model`, the loss history and the summary."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from omegaconf import OmegaConf

from treedec.errors import UserError
from treedec.report.loggers import make_logger
from treedec.run.outputs import RunOutput


def main(cfg, out: RunOutput, tcfg) -> dict | None:
    from treedec.models.qwen3_vl import Qwen3VL
    from treedec.models.vlm import model_type
    from treedec.training.qwen3_vl_trainer import STATE, FinetuneConfig, VLTrainer

    if not cfg.model.path:
        raise UserError("model=qwen3_vl needs model.path=DIR (a local Qwen3-VL checkpoint folder)")
    if model_type(Path(cfg.model.path)) != "qwen3_vl":
        raise UserError(f"model=qwen3_vl but {cfg.model.path} is not a Qwen3-VL checkpoint (config.json model_type)")
    knobs = OmegaConf.to_container(cfg.model.get("finetune") or {}, resolve=True)
    try:
        fcfg = FinetuneConfig(**knobs)
    except TypeError as e:
        raise UserError(f"model.finetune: {e} (knobs: {', '.join(FinetuneConfig.__dataclass_fields__)})") from None
    if tcfg.crops_per_page:
        print(f"note: train.crops_per_page={tcfg.crops_per_page} is not used for Qwen3-VL (pages only)")
    ckpt = out.dir / "model"
    resuming = (ckpt / STATE).is_file()  # a checkpoint of this run: go on from it
    vlm = Qwen3VL.load(ckpt if resuming else cfg.model.path, device="cpu", fmt="treedec")
    trainer = VLTrainer(vlm, tcfg, fcfg, make_logger(cfg.get("logger"), out.dir, cfg))
    if resuming and trainer.resume(ckpt) and trainer.rank == 0:
        print(f"resumed from {ckpt} at step {trainer.step}")
    history = trainer.fit(out.dir)
    trainer.close()
    if trainer.rank != 0:
        return None
    (out.dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    last = history[-20:]
    return {"steps": trainer.step, "final_loss": sum(h["loss"] for h in last) / len(last),
            "final_token_acc": sum(h["token_acc"] for h in last) / len(last),
            "train_s": sum(h["step_s"] for h in history), "model": str(out.dir / "model"),
            "parallel": trainer.parallel, "world": trainer.world, "device": str(trainer.device),
            "params_m": sum(p.numel() for p in vlm.model.parameters()) / 1e6,
            "bf16": bool(tcfg.bf16 and trainer.device.type == "cuda"), "torch": torch.__version__}
