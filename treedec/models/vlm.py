"""The document VLM: an Idefics3 model with treedec's tokenizer, image preparation and
prompts; saved and loaded as a standard HF folder (config.json, model.safetensors,
tokenizer.json, treedec.json, and the tokenizer/processor configs a server such as vLLM
reads: see `treedec.models.serving`)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from treedec.errors import UserError
from treedec.formats.declare import declare_format
from treedec.models.adapter import CausalLMAdapter, Prompt
from treedec.models.planar_rope import use_planar
from treedec.models.serving import write_serving_files
from treedec.models.tiny import IDEFICS3_SPECIAL, image_prompt_ids, image_seq_len, tiny_idefics3_config
from treedec.tokenizer import DEFAULT_CHARSET, Tokenizer

# What the model is asked to emit; reserved tokens keep the vocabulary stable for new strategies.
MODES = {"flat": "<|flat|>", "tree": "<|tree|>", "tree_rows": "<|tree_rows|>", "crop": "<|crop|>"}
RESERVED = tuple(f"<|reserved_{i}|>" for i in range(8))
POSITIONS = ("linear", "planar")
IMAGE_START = 2  # the first <image> token's index in the prompt (`image_prompt_ids`)


def vlm_tokenizer(charset: str = DEFAULT_CHARSET) -> Tokenizer:
    return Tokenizer(charset, extra_special=(*IDEFICS3_SPECIAL, *MODES.values(), *RESERVED))


@dataclass
class VLMSpec:
    """Sizes of a tiny treedec VLM (the arguments of `tiny_idefics3_config`)."""
    image_size: int = 256
    patch_size: int = 16
    scale_factor: int = 1
    vision_hidden: int = 192
    vision_layers: int = 2
    vision_heads: int = 3
    text_hidden: int = 256
    text_layers: int = 4
    head_dim: int = 64
    max_positions: int = 4096
    # rotary positions of image patches: "linear" (one index per input token, v1) or "planar"
    # (a patch gets its row and column, the text continues a page-width on: treedec.models.planar_rope)
    positions: str = "linear"

    def __post_init__(self):
        if self.positions not in POSITIONS:
            raise UserError(f"unknown model.spec.positions {self.positions!r}; choose {' or '.join(POSITIONS)}")

    @property
    def image_tokens(self) -> int:
        return image_seq_len(self.image_size, self.patch_size, self.scale_factor)

    def config_sizes(self) -> dict:
        """The arguments of `tiny_idefics3_config` (the sizes; `positions` is applied after)."""
        return {k: v for k, v in asdict(self).items() if k != "positions"}


def canvas(image: Image.Image, size: int) -> Image.Image:
    """The image on a white `size` x `size` square, top-left anchored; shrunk (keeping its
    aspect) only when larger, so glyphs keep their scale and grid alignment."""
    image = image.convert("RGB")
    if max(image.size) > size:
        f = size / max(image.size)
        image = image.resize((max(1, round(image.width * f)), max(1, round(image.height * f))), Image.Resampling.BILINEAR)
    out = Image.new("RGB", (size, size), (255, 255, 255))
    out.paste(image, (0, 0))
    return out


def pixels(images: list[Image.Image], size: int) -> torch.Tensor:
    """[1, n, 3, S, S] normalized as Idefics3 expects ((x/255 - 0.5) / 0.5)."""
    arr = np.stack([np.asarray(canvas(im, size), dtype=np.float32) for im in images])  # n, S, S, 3
    x = torch.from_numpy(arr).permute(0, 3, 1, 2).div(127.5).sub(1.0)
    return x[None]


class VLM:
    """Model + tokenizer + spec; `prompt(image, mode)` builds what the engine prefills."""

    trainable = True  # `python -m treedec train` can continue it
    forced = False  # its tokens are its own (treedec.models.forced: a model whose tokens are forced)
    directory: Path | None = None  # the checkpoint folder it was loaded from

    def __init__(self, model: torch.nn.Module, tokenizer: Tokenizer, spec: VLMSpec, pages: dict | None = None):
        self.model, self.tokenizer, self.spec = model, tokenizer, spec
        # the synthetic page distribution (SynthConfig knobs) the model was trained on: `run`'s
        # default for data=synth; square pages of the model's image size when unknown
        self.pages = pages or {"width": spec.image_size, "height": spec.image_size}

    @classmethod
    def tiny(cls, spec: VLMSpec | None = None, seed: int = 0, attn: str = "sdpa") -> "VLM":
        from transformers import Idefics3ForConditionalGeneration

        spec = spec or VLMSpec()
        tok = vlm_tokenizer()
        cfg = tiny_idefics3_config(tok, **spec.config_sizes(), attn_implementation=attn)
        torch.manual_seed(seed)
        return cls(with_positions(Idefics3ForConditionalGeneration(cfg), spec), tok, spec)

    @property
    def crop_grid(self) -> int:
        """Page pixels per image token side (patch x pixel-shuffle factor): region crops
        snapped to this grid hold exactly the pixels of the page's own patches, since pages
        and crops are placed unscaled at the canvas's top-left (`canvas`)."""
        return self.spec.patch_size * self.spec.scale_factor

    def page_grid(self, image: Image.Image | None) -> int | None:
        """`crop_grid` where `image` is shown to the model unscaled (it fits the canvas);
        None for a larger page, which the canvas shrinks (its patches then fall on no grid
        of the page's pixels)."""
        if image is None or max(image.size) > self.spec.image_size:
            return None
        return self.crop_grid

    def has_prompt(self, mode: str) -> bool:
        """Every mode of `MODES`: its tokenizer has them all."""
        return mode in MODES

    def mode_prompt(self, mode: str, category: str | None = None) -> str:
        """What the prompt says after the image in `mode`: the mode's token."""
        if mode not in MODES:
            raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join(MODES)}")
        return MODES[mode]

    def prompt_ids(self, mode: str) -> list[int]:
        if mode not in MODES:
            raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join(MODES)}")
        return image_prompt_ids(self.tokenizer, self.spec.image_tokens) + [self.tokenizer.vocab[MODES[mode]]]

    def prompt(self, image: Image.Image, mode: str, category: str | None = None) -> Prompt:
        return Prompt(self.prompt_ids(mode), {"pixel_values": pixels([image], self.spec.image_size)})

    def generate_inputs(self, prompt: Prompt) -> dict:
        """What transformers' `generate` takes besides the prompt's ids (`treedec.results.check`)."""
        return dict(prompt.inputs)

    def adapter(self) -> CausalLMAdapter:
        return CausalLMAdapter(self.model)

    # ------------------------------------------------------------------ files
    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(d, safe_serialization=True)
        write_serving_files(d, self.tokenizer, self.spec.image_size, self.spec.image_tokens, self.spec.max_positions)
        (d / "treedec.json").write_text(json.dumps({"spec": asdict(self.spec), "pages": self.pages}, indent=1))
        declare_format(d, "treedec")  # what it writes (`treedec.formats.declare`)
        return d

    @classmethod
    def load(cls, directory: str | Path, attn: str = "sdpa") -> "VLM":
        """Load a checkpoint folder of treedec's own VLM (config.json `model_type` idefics3).
        Any checkpoint kind, chosen by its `model_type`: `treedec.models.loader.load_model`."""
        from transformers import Idefics3ForConditionalGeneration

        d = Path(directory)
        kind = model_type(d)
        if kind != "idefics3":
            raise UserError(f"{d} holds a {kind!r} checkpoint, not treedec's Idefics3 VLM "
                            "(treedec.models.loader.load_model loads either kind)")
        for name in ("config.json", "model.safetensors", "tokenizer.json", "treedec.json"):
            if not (d / name).is_file():
                raise UserError(f"no checkpoint at {d}: {name} is missing (expected a folder written by treedec train)")
        try:
            meta = json.loads((d / "treedec.json").read_text())
            spec = VLMSpec(**meta["spec"])
            model = Idefics3ForConditionalGeneration.from_pretrained(  # computed in float32, however stored
                d, config=_idefics3_config(d), attn_implementation=attn, dtype=torch.float32)
            tok = Tokenizer.load(d)
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise UserError(f"cannot load the checkpoint at {d}: {str(e).splitlines()[0]}") from None
        vlm = cls(with_positions(model.eval(), spec), tok, spec, meta.get("pages"))
        vlm.directory = d  # where files trained for this checkpoint lie beside it (an MTP head: treedec.drafters.mtp)
        return vlm


def with_positions(model: torch.nn.Module, spec: VLMSpec) -> torch.nn.Module:
    """The model with the rotary positions its spec names (planar: `treedec.models.planar_rope`)."""
    if spec.positions == "planar":
        use_planar(model, IMAGE_START, spec.image_size // (spec.patch_size * spec.scale_factor))
    return model


def _idefics3_config(d: Path):
    """The checkpoint's config, built from config.json by the constructor. transformers'
    own path (`from_dict`) formats the config for a debug log even when it is not shown,
    which builds a default Idefics3Config; that default's pad_token_id 128002 lies outside
    its default vocabulary, so every load warned "pad_token_id ... 128002" about a config
    treedec never uses."""
    from transformers import Idefics3Config

    data = json.loads((d / "config.json").read_text())
    return Idefics3Config(**{k: v for k, v in data.items() if k not in ("model_type", "transformers_version")})


def model_type(directory: Path) -> str | None:
    """The `model_type` of a checkpoint folder's config.json."""
    path = directory / "config.json"
    if not path.is_file():
        raise UserError(f"no checkpoint at {directory}: config.json is missing (expected a folder written by "
                        "treedec train, or a Qwen3-VL checkpoint)")
    try:
        return json.loads(path.read_text()).get("model_type")
    except (OSError, ValueError, AttributeError) as e:
        raise UserError(f"cannot read {path}: {str(e).splitlines()[0]}") from None


def checkpoint_pages(directory: str | Path) -> dict | None:
    """The synthetic page distribution a treedec checkpoint was trained on, as `VLM.pages` has
    it (treedec.json's `pages`; a page of the model's image size when none is recorded); None
    for a folder without treedec.json (a Qwen3-VL checkpoint)."""
    path = Path(directory) / "treedec.json"
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
        return meta.get("pages") or {"width": meta["spec"]["image_size"], "height": meta["spec"]["image_size"]}
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as e:
        raise UserError(f"cannot read {path}: {str(e).splitlines()[0]}") from None


SHIPPED = Path(__file__).resolve().parents[1] / "assets" / "models" / "tiny"
