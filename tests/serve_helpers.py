"""A `treedec serve` in the test's process: the server built from a `serve` config as the command
builds it, uvicorn listening on a free port of 127.0.0.1 in a thread, stopped (what is in flight
answered) when the block ends; and requests as the parsers' clients send them."""
from __future__ import annotations

import base64
import io
import threading
import time
from contextlib import contextmanager

from PIL import Image


def serve_config(overrides: list[str]):
    from hydra import compose, initialize_config_module

    from treedec.conf import register_schemas

    register_schemas()
    with initialize_config_module("treedec.conf", version_base=None):
        return compose(config_name="serve", overrides=overrides)


@contextmanager
def serving(overrides: list[str] = (), server=None):
    """(base URL, `treedec.serve.app.Server`) of a server on 127.0.0.1 for the block."""
    import uvicorn

    from treedec.commands.serve import build
    from treedec.serve.app import make_app

    server = server or build(serve_config(list(overrides)))
    uv = uvicorn.Server(uvicorn.Config(make_app(server), host="127.0.0.1", port=0, log_config=None,
                                       log_level="warning", timeout_graceful_shutdown=None))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    t = time.time()
    while not uv.started:
        assert thread.is_alive() and time.time() - t < 60, "the server did not start"
        time.sleep(0.02)
    port = uv.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        uv.should_exit = True
        thread.join(60)


def data_url(image: Image.Image, fmt: str = "PNG") -> str:
    buf = io.BytesIO()
    image.save(buf, fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def messages(image: Image.Image, text: str, system: str | None = None, text_first: bool = False) -> list[dict]:
    parts = [{"type": "image_url", "image_url": {"url": data_url(image)}}, {"type": "text", "text": text}]
    user = {"role": "user", "content": parts[::-1] if text_first else parts}
    return ([{"role": "system", "content": system}] if system else []) + [user]


def metric(text: str, name: str) -> float:
    """A metric's value in Prometheus text (its first sample)."""
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)
