"""`python -m treedec serve`: the OpenAI-compatible server (`treedec.serve`), its decoding the
configured strategy on the embedded engine; it serves until stopped (Ctrl-C or SIGTERM: what is
in flight is answered first). Its log goes to OUT/serve.log."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import torch

from treedec.data import open_dataset
from treedec.errors import UserError
from treedec.formats import get_format
from treedec.formats.declare import model_format
from treedec.models.loader import load_vlm
from treedec.run.outputs import RunOutput
from treedec.runtimes.base import config_from
from treedec.runtimes.embedded import EmbeddedConfig
from treedec.serve.forced_pages import DataPages
from treedec.serve.strategy import served_strategy


def main(cfg, out: RunOutput) -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as e:
        raise UserError(f"serve needs {e.name}: pip install 'treedec[serve]'") from None
    from treedec.serve.app import make_app

    server = build(cfg)
    print(f"treedec serve: {server.name} with strategy={server.strategy.name} on http://{server.cfg.host}:"
          f"{server.cfg.port}/v1 (log: {out.dir / 'serve.log'})", flush=True)
    # uvicorn answers SIGTERM (and Ctrl-C) with a graceful shutdown, then raises the signal again: exit quietly then
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped)
    uvicorn.run(make_app(server), host=server.cfg.host, port=server.cfg.port, log_config=None, log_level="warning",
                timeout_graceful_shutdown=None)


def _stopped(signum, frame) -> None:
    print(f"treedec serve: stopped ({signal.Signals(signum).name}): every request in flight was answered", flush=True)
    sys.exit(0)


def build(cfg):
    """The server a `serve` config describes (a `treedec.serve.app.Server`): model, format,
    strategy, engine limits, data (forced)."""
    from treedec.serve.app import ServeConfig, Server

    if cfg.runtime.name != "embedded":
        raise UserError(f"serve runs its strategies on the embedded engine (runtime=embedded); runtime="
                        f"{cfg.runtime.name} has its own server: vllm serve MODEL")
    engine = config_from(EmbeddedConfig, cfg.runtime, "runtime=embedded")
    torch.set_num_threads(int(engine.threads))
    options = ServeConfig(str(cfg.host), int(cfg.port), cfg.api_key and str(cfg.api_key), cfg.model_name,
                          int(cfg.queue_size), int(cfg.max_image_pixels))
    if options.queue_size < 1 or options.max_image_pixels < 1:
        raise UserError("queue_size and max_image_pixels must be at least 1")
    vlm = load_vlm(cfg.model)
    fmt = served_format(cfg, vlm)
    served = served_strategy(cfg.strategy, vlm, fmt)
    data = None
    if vlm.forced:
        samples = open_dataset(cfg.data, model_pages=vlm.pages)
        try:
            data = DataPages(samples, fmt)
        except ValueError as e:
            raise UserError(f"model=forced serves about the pages of data=: {e}") from None
    return Server(vlm, served, fmt, engine, options, options.model_name or served_name(cfg.model), data)


def served_format(cfg, vlm):
    """The model's format; a checkpoint that declares none (a stock checkpoint, asked in its own
    words) is served as asked with `sequential`, in treedec's format as far as the server needs one
    (no drafts to write, no page of its own to read)."""
    try:
        return model_format(cfg.model, vlm)
    except UserError:
        if cfg.strategy.name != "sequential" or vlm.forced:
            raise
        return get_format("treedec")


def served_name(model_cfg) -> str:
    path = model_cfg.get("path")
    return Path(str(path)).name if path else f"treedec-{model_cfg.name}"
