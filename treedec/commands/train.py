"""`python -m treedec train`: train (or resume) the tiny VLM; writes the model, loss
curves and summary into `out`."""
from __future__ import annotations

import json

import torch
from omegaconf import OmegaConf

from treedec.errors import UserError
from treedec.models.loader import load_model
from treedec.models.vlm import VLM, VLMSpec
from treedec.report.loggers import make_logger
from treedec.report.plots import training_curves
from treedec.run.outputs import RunOutput
from treedec.training.trainer import TrainConfig, Trainer


def main(cfg, out: RunOutput) -> dict:
    from treedec.training import mtp, ptp

    if mtp.trains_head(cfg.strategy):  # the MTP head only, on the frozen model
        return mtp.main(cfg, out)
    if ptp.trains_placeholders(cfg.strategy):  # PTP's placeholders only, on the frozen model
        return ptp.main(cfg, out)
    tcfg = TrainConfig(**OmegaConf.to_container(cfg.train, resolve=True))
    torch.set_num_threads(tcfg.threads)
    if cfg.model.get("name") == "qwen3_vl":
        from treedec.commands import train_qwen3_vl

        return train_qwen3_vl.main(cfg, out, tcfg)
    if cfg.model.path:
        vlm = load_model(cfg.model.path)
        if not vlm.trainable:
            raise UserError(f"{cfg.model.path} is a {type(vlm).__name__} checkpoint: train continues treedec's own "
                            "tiny VLM only (Qwen3-VL checkpoints run with `run` on the embedded engine)")
    else:
        spec = VLMSpec(**OmegaConf.to_container(cfg.model.spec, resolve=True))
        vlm = VLM.tiny(spec, seed=tcfg.seed)
    log = make_logger(cfg.get("logger"), out.dir, cfg)
    trainer = Trainer(vlm, tcfg, out.dir, log)
    resumed = trainer.resume()
    if resumed:
        print(f"resumed from {trainer.ckpt_dir} at step {trainer.step}")
    if trainer.step >= tcfg.steps and not resumed:
        raise UserError("train.steps must be >= 1")
    history = trainer.fit()
    trainer.close()
    if trainer.rank != 0:
        return None
    if tcfg.average > 0:
        from treedec.training.average import average_checkpoints

        vlm.save(out.dir / "model_last")
        average_checkpoints(trainer.kept()[-tcfg.average:], out.dir / "model")
    else:
        vlm.save(out.dir / "model")
    training_curves(history, out.dir / "loss.png")
    (out.dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    last = history[-20:]
    return {"steps": trainer.step, "final_loss": sum(h["loss"] for h in last) / len(last),
            "final_token_acc": sum(h["token_acc"] for h in last) / len(last),
            "train_s": sum(h["step_s"] for h in history), "model": str(out.dir / "model"), "resumed": resumed,
            "params_m": sum(p.numel() for p in vlm.model.parameters()) / 1e6,
            "stopped_early": trainer.stopped_early}  # at train.time_limit_s; rerun with a larger one to go on
