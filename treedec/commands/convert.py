"""`python -m treedec convert src=DIR out=DIR [format=NAME]`: a checkpoint in InternVL's
remote-code layout (`internvl_chat`: HPD-Parsing's) written in transformers' `internvl` layout,
which treedec loads (`treedec.models.convert_internvl`)."""
from __future__ import annotations

from pathlib import Path

from treedec.errors import UserError
from treedec.models.convert_internvl import convert_internvl_chat
from treedec.run.outputs import RunOutput


def main(cfg, out: RunOutput) -> dict:
    src = Path(str(cfg.src))
    if not src.is_dir():
        raise UserError(f"src {str(src)!r} is not a checkpoint folder")
    done = convert_internvl_chat(src, out.dir, cfg.get("format"))
    print(f"{src} ({done['language_model']} language model, chat template: {done['chat_template']}) written as "
          f"internvl in {out.dir}; try: python -m treedec check model.path={out.dir}")
    return {"src": str(src), "path": str(out.dir), "format": cfg.get("format"), **done}
