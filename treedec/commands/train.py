"""`python -m treedec train`: train (or resume) the tiny VLM; writes the model, loss
curves and summary into `out`."""
from __future__ import annotations

import json

import torch
from omegaconf import OmegaConf

from treedec.errors import UserError
from treedec.loggers import make_logger
from treedec.models.vlm import VLM, VLMSpec
from treedec.outputs import RunOutput
from treedec.training.trainer import TrainConfig, Trainer


def plot_history(history: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [h["step"] for h in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(steps, [h["loss"] for h in history], lw=0.8)
    a.set_yscale("log")
    a.set_xlabel("step")
    a.set_ylabel("training loss (per token)")
    b.plot(steps, [h["token_acc"] for h in history], lw=0.8)
    b.set_xlabel("step")
    b.set_ylabel("teacher-forced token accuracy")
    b.set_ylim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(cfg, out: RunOutput) -> dict:
    tcfg = TrainConfig(**OmegaConf.to_container(cfg.train, resolve=True))
    torch.set_num_threads(tcfg.threads)
    if cfg.model.path:
        vlm = VLM.load(cfg.model.path)
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
    if trainer.rank != 0:
        return None
    vlm.save(out.dir / "model")
    plot_history(history, out.dir / "loss.png")
    (out.dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    last = history[-20:]
    return {"steps": trainer.step, "final_loss": sum(h["loss"] for h in last) / len(last),
            "final_token_acc": sum(h["token_acc"] for h in last) / len(last),
            "train_s": sum(h["step_s"] for h in history), "model": str(out.dir / "model"), "resumed": resumed,
            "params_m": sum(p.numel() for p in vlm.model.parameters()) / 1e6}
