"""Model v2's starting weights: the shipped tiny_v1 model on a larger page.

Every weight is v1's except the ViT's position embedding, whose 16 x 16 grid (256 px pages
of 16 px patches) is resized bicubically to the new grid (640 px: 40 x 40), the usual way to
move a ViT to a higher resolution. The text model, glyph features and prompts are v1's, so
training starts from a reader of 16 px glyph cells.

    python experiments/warm_start_v2.py OUT [--image-size 640] [--preset v2_model] [--rope planar]
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, replace

import torch
import torch.nn.functional as F

from treedec.data.synth import synth_config
from treedec.models.vlm import SHIPPED, VLM

POS = "model.vision_model.embeddings.position_embedding.weight"


def resize_positions(table: torch.Tensor, side: int) -> torch.Tensor:
    """A [g*g, d] grid of position embeddings resized to [side*side, d]."""
    g = int(round(table.shape[0] ** 0.5))
    grid = table.reshape(g, g, -1).permute(2, 0, 1)[None].float()  # 1, d, g, g
    out = F.interpolate(grid, size=(side, side), mode="bicubic", align_corners=False)
    return out[0].permute(1, 2, 0).reshape(side * side, -1).to(table.dtype)


def tile_positions(table: torch.Tensor, side: int) -> torch.Tensor:
    """A [g*g, d] grid repeated periodically to [side*side, d]: cell (r, c) gets the embedding of
    (r mod g, c mod g), so neighbouring cells differ as they did on the small grid."""
    g = int(round(table.shape[0] ** 0.5))
    idx = torch.arange(side) % g
    return table.reshape(g, g, -1)[idx][:, idx].reshape(side * side, -1)


POSITIONS = {"bicubic": resize_positions, "periodic": tile_positions}


def warm_start(source, image_size: int, preset: str, positions: str = "bicubic", rope: str = "linear") -> VLM:
    v1 = VLM.load(source)
    spec = replace(v1.spec, image_size=image_size, positions=rope)
    v2 = VLM.tiny(spec)
    state = v1.model.state_dict()
    state[POS] = POSITIONS[positions](state[POS], image_size // spec.patch_size)
    v2.model.load_state_dict(state)  # strict: every other weight has v1's shape
    v2.pages = asdict(synth_config({"preset": preset}))
    return v2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--source", default=str(SHIPPED))
    ap.add_argument("--image-size", type=int, default=640)
    ap.add_argument("--preset", default="v2_model")
    ap.add_argument("--positions", choices=sorted(POSITIONS), default="bicubic",
                    help="how the position grid grows: resized (bicubic) or repeated (periodic)")
    ap.add_argument("--rope", choices=("linear", "planar"), default="linear",
                    help="the text model's rotary positions for image patches (treedec/models/planar_rope.py)")
    args = ap.parse_args()
    path = warm_start(args.source, args.image_size, args.preset, args.positions, args.rope).save(args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
