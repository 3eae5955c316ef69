"""`model=forced model.size=S`: a decoder of Qwen3-VL's text-stack shape with random weights,
whose every token is forced to the page's ground truth, so that depth and speed of every
strategy can be measured on real pages at real model sizes without a model that reads them.

- The forward runs in full on every step (prefill and decode, every row of every stream and
  draft node), so its cost is a model of size S's; only the choice of token is forced: the
  engine takes it from the strategy's own target of the page's ground truth
  (`treedec.engine.forced`): the flat form for `sequential`, the tree for `padoc` and every
  fork rule, a region's content for a crop (`crops`, HSD's stage 1:
  `treedec.strategies.crop_read`). Drafters see only the page image (the pipeline OCR reads
  the real scans); a draft is accepted where it equals the forced tokens.
- The decoder: transformers' Qwen3 (`Qwen3ForCausalLM`): Qwen3-VL's text stack is Qwen3's
  decoder with multimodal RoPE, the same cost per token. Sizes (S = non-embedding decoder
  parameters, `Shape.params`; the vocabulary is treedec's character tokenizer, ~300 tokens,
  so the embeddings add almost nothing, where Qwen's 151k-token BPE vocabulary adds 0.16-0.39 B):

      size   layers  hidden  heads/kv  head_dim  MLP     params   shape of
      1m     2       192     3/1       64        768     1.08 M   (tests)
      30m    10      512     8/4       64        1536    31.5 M
      0.1b   12      768     12/4      64        2816    96.7 M
      0.5b   28      1024    16/8      128       3584    0.48 B   Qwen3-0.6B's stack, MLP 3584
      1.5b   28      2048    16/8      128       6144    1.41 B   Qwen3-VL-2B's text stack
      4b     36      2560    32/8      128       9728    3.63 B   Qwen3-VL-4B's text stack

- The prompt: the page's image tokens (as many as Qwen3-VL's processor gives the page at its
  resolution: 16-px patches merged 2 x 2, pixels kept within Qwen3-VL-2B-Instruct's range
  [65536, 16777216], `vision_tokens`; or `model.vision_tokens=N`), then the mode's prompt text
  in the output format (`model.format`, `Format.prompt`: `<|flat|>` in treedec's, `document
  parsing with fork.` in hpd's tree mode, dots.ocr's 888-character instruction, ...) tokenized by
  the forced tokenizer, as a checkpoint of that format is asked; a mode the format has no prompt
  for (a crop in markdown or doctags; table_rows' `tree_rows`) keeps treedec's mode
  token, which the forced tokenizer has, as a checkpoint fine-tuned on that mode would (`mode_prompt`;
  a layout pass without a prompt of its own, `layout`: the tree mode's).
  The decoder prefills them (real cost). The vision encoder is not run: its cost is left out
  of every time (a page of 3.6 k image tokens costs Qwen3-VL-2B's 24-layer ViT about
  2 x 0.4 G params x 14.6 k patches = 12 TFLOPs more; not measured here).
- The tokenizer (`model.tokenizer`): by default treedec's character tokenizer (one token per
  character), its charset widened to the scripts of real pages (`wide_charset`: Latin, Greek,
  Cyrillic, symbols, CJK; ~25 k tokens). Content runs 2-4x more tokens than under Qwen's BPE
  (about 1 token per CJK character either way, 3-4 Latin characters per BPE token) while layout
  tokens (`<BLOCK>`, categories, box digits) run about the same, so the share of content, which
  branches decode in parallel, is larger here (docs/forced_tokenizer.md measures it). Or a real
  VLM's BPE (`model.tokenizer=PATH`: a tokenizer.json, a checkpoint directory or a .tiktoken
  file, `treedec.models.bpe_tokenizer`) with treedec's tokens, the prompt modes and table_rows'
  row tags added, as a checkpoint fine-tuned on treedec's format has them: the targets are that
  tokenizer's ids and the LM head has its vocabulary (Qwen's: 151 k tokens), so both the steps
  and the cost per row are a BPE reader's.
- `mtp` / `hpd` are refused: no MTP head is trained for such a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from treedec.errors import UserError
from treedec.formats import get_format, resolve_format
from treedec.models.adapter import CausalLMAdapter, Prompt
from treedec.models.device import model_device
from treedec.models.instructions import LAYOUT_AS
from treedec.models.vlm import MODES, vlm_tokenizer
from treedec.tokenizer import DEFAULT_CHARSET

PATCH, MERGE = 16, 2  # Qwen3-VL's vision patch (px) and spatial merge: one image token per 32 x 32 px
MIN_PIXELS, MAX_PIXELS = 65536, 16777216  # Qwen3-VL-2B-Instruct's preprocessor_config.json size range
# Characters of real pages beyond the default charset: Latin-1 and Latin Extended, Greek, Cyrillic, punctuation and
# symbols (arrows, math operators, ...), CJK symbols and kana, CJK unified ideographs, full-width forms
WIDE = ((0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x2000, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF),
        (0xFF00, 0xFFEF))


def wide_charset() -> str:
    """The forced model's characters: the default charset, tab, and the printable characters of `WIDE`."""
    import unicodedata

    extra = (chr(c) for a, b in WIDE for c in range(a, b + 1))
    return DEFAULT_CHARSET + "\t" + "".join(c for c in extra if unicodedata.category(c)[0] not in "CZ" or c == "\u3000")


def forced_tokenizer(path: str | None):
    """The character tokenizer of `wide_charset`, or the BPE at `path` with treedec's tokens, the
    prompt modes and table_rows' row tags added (see the module's doc)."""
    if path is None:
        return vlm_tokenizer(wide_charset())
    from treedec.models.bpe_tokenizer import ROW_TAGS, bpe_tokenizer

    return bpe_tokenizer(path, extra=(*MODES.values(), *ROW_TAGS))


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int

    @property
    def params(self) -> int:
        """Non-embedding parameters: attention (q, k, v, o, q/k norms), SwiGLU MLP, two RMSNorms per layer."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads) + 2 * self.head_dim
        return self.layers * (attn + 3 * self.hidden * self.intermediate + 2 * self.hidden) + self.hidden


SIZES = {
    "1m": Shape(2, 192, 3, 1, 64, 768),
    "30m": Shape(10, 512, 8, 4, 64, 1536),
    "0.1b": Shape(12, 768, 12, 4, 64, 2816),
    "0.5b": Shape(28, 1024, 16, 8, 128, 3584),
    "1.5b": Shape(28, 2048, 16, 8, 128, 6144),
    "4b": Shape(36, 2560, 32, 8, 128, 9728),
}


def vision_tokens(image: Image.Image) -> int:
    """Image tokens Qwen3-VL's processor gives `image`: its sides rounded to 32 px, its area
    scaled into [MIN_PIXELS, MAX_PIXELS] (transformers' `smart_resize`), one token per 32 x 32 px."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    f = PATCH * MERGE
    h, w = smart_resize(max(image.height, f), max(image.width, f), factor=f, min_pixels=MIN_PIXELS,
                        max_pixels=MAX_PIXELS)
    return (h // f) * (w // f)


class ForcedAdapter(CausalLMAdapter):
    """The decoder's adapter, on the model's device (the engine's tensors are moved there). Every
    forward waits for the device to finish, as a model whose next tokens are read each step does:
    the forced engine never reads the logits, and an unsynchronized GPU would run behind the clock."""
    forced = True

    def prefill(self, prompt: Prompt, hidden: bool = False):
        out = super().prefill(prompt, hidden)
        _sync(self.device)
        return out

    def step(self, *args, **kwargs):
        out = super().step(*args, **kwargs)
        _sync(self.device)
        return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ForcedModel:
    """A `PageModel` (`treedec.models.page_model`) whose tokens are forced (see the module)."""

    trainable = False
    forced = True  # the engine forces its tokens (ForcedAdapter.forced); an MTP drafter refuses it
    directory: Path | None = None
    pages: dict | None = None

    def __init__(self, size: str, vision_tokens: int | None = None, seed: int = 0, dtype: str = "float32",
                 device: str | None = None, tokenizer: str | None = None, fmt: str | None = None):
        from transformers import Qwen3Config, Qwen3ForCausalLM

        if size not in SIZES:
            raise UserError(f"model.size={size!r} is not a forced model size; sizes: {', '.join(SIZES)}")
        if vision_tokens is not None and (isinstance(vision_tokens, bool) or int(vision_tokens) < 1):
            raise UserError(f"model.vision_tokens must be null (Qwen3-VL's count per page) or >= 1, got {vision_tokens}")
        if dtype not in ("float32", "bfloat16", "float16"):
            raise UserError(f"model.dtype must be float32, bfloat16 or float16, got {dtype!r}")
        self.size, self.shape, self.fixed_vision = size, SIZES[size], vision_tokens
        self.tokenizer = forced_tokenizer(tokenizer)
        self.format = get_format(resolve_format(fmt, None, True))  # it has treedec's tokens: treedec's by default
        s = self.shape
        vocab = len(self.tokenizer) + (-len(self.tokenizer)) % 64
        cfg = Qwen3Config(vocab_size=vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
                          num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
                          head_dim=s.head_dim, max_position_embeddings=1 << 17, rms_norm_eps=1e-6,
                          tie_word_embeddings=True, pad_token_id=self.tokenizer.pad_id,
                          bos_token_id=self.tokenizer.bos_id, eos_token_id=self.tokenizer.eos_id)
        cfg._attn_implementation = "sdpa"
        try:
            dev = model_device(device)
        except RuntimeError as e:
            raise UserError(f"model.device={device!r}: {e}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise UserError(f"model.device={device!r}, but torch sees no CUDA device")
        torch.manual_seed(seed)
        with dev:  # weights made where they run (1.5b: 6 GB in float32)
            self.model = Qwen3ForCausalLM(cfg).to(getattr(torch, dtype)).eval()

    def prompt(self, image: Image.Image, mode: str, category: str | None = None) -> Prompt:
        """The image tokens, then the mode's prompt text (`mode_prompt`; a crop's by its category)."""
        text = self.mode_prompt(mode, category)
        n = int(self.fixed_vision) if self.fixed_vision else vision_tokens(image)
        return Prompt([self.tokenizer.image_id] * n + self.tokenizer.encode(text))

    def mode_prompt(self, mode: str, category: str | None = None) -> str:
        """The prompt text of `mode` after the image: the format's (`Format.prompt`), else, for a
        mode the format has no prompt for, treedec's mode token (a layout pass: the tree mode's;
        see the module's doc)."""
        token_mode = LAYOUT_AS.get(mode, mode)
        if token_mode not in MODES:
            raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join([*MODES, *LAYOUT_AS])}")
        try:
            return self.format.prompt(mode, category)
        except UserError:
            return MODES[token_mode]

    def has_prompt(self, mode: str) -> bool:
        """Every mode of `MODES` (the forced tokenizer has them all) and `layout` (a format's layout pass)."""
        return LAYOUT_AS.get(mode, mode) in MODES

    def adapter(self) -> CausalLMAdapter:
        return ForcedAdapter(self.model)

    def page_grid(self, image: Image.Image | None) -> int | None:
        return None  # Qwen3-VL resizes its images: no grid of the page's pixels


def decoder_params(model: ForcedModel) -> int:
    """The built decoder's non-embedding parameters (checks `Shape.params`)."""
    emb = model.model.get_input_embeddings().weight.numel()
    return sum(p.numel() for p in model.model.parameters()) - emb

