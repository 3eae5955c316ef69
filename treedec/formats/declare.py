"""Which format a model writes: `model.format=NAME`, else what its checkpoint declares (a
`treedec_format.json` beside the weights, which treedec writes when it saves a checkpoint), else
`treedec` for a checkpoint with treedec's tokens, else a one-line request to name it
(`resolve_format`)."""
from __future__ import annotations

import json
from pathlib import Path

from treedec.formats.base import Format, get_format, resolve_format

DECLARED = "treedec_format.json"


def declared_format(directory: str | Path | None) -> str | None:
    """The format a checkpoint folder declares (None: it declares none)."""
    path = Path(directory) / DECLARED if directory else None
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("format")


def declare_format(directory: str | Path, name: str) -> Path:
    """Write `name` as the format of the checkpoint in `directory`."""
    path = Path(directory) / DECLARED
    path.write_text(json.dumps({"format": name}) + "\n", encoding="utf-8")
    return path


def model_format(model_cfg, vlm) -> Format:
    """The format of the model a `model` config names and `vlm` is (`model.format`, its
    checkpoint's declaration, its tokens)."""
    name = resolve_format(model_cfg.get("format"), declared_format(vlm.directory),
                          vlm.tokenizer.treedec_tokens)  # HPD-Parsing's <FORK> alone is no sign
    return get_format(name)
