"""Qwen3-VL checkpoints (e.g. a PaDoc-style Qwen3-VL-2B fine-tune) on the embedded engine.

What differs from the tiny Idefics3 VLM, as read in transformers 5.19's `qwen3_vl`:

- Multimodal RoPE. `Qwen3VLModel.get_rope_index` gives every prompt token a (t, h, w)
  position: text tokens the same index on the three axes, image tokens their grid cell
  (offset by where the image starts); text after an image continues at (largest position
  so far + 1). So once past the image, a token at sequence index i has rotary position
  i + delta on all three axes, with delta = max position + 1 - prompt length (<= 0): the
  page's `rope_delta`. The prompt's positions are computed here, once, and passed to the
  prefill as `position_ids` [4, 1, L] (row 0: the plain index, which the text model only
  uses to build its causal mask; rows 1-3: t, h, w). The page's delta travels to the
  engine as `Prompt.position_offset`: the engine adds it to the 1-D positions of every
  token it decodes for that page (pages with different images, hence different deltas,
  share one step), and `Qwen3VLAdapter.step` broadcasts those positions to the three
  rotary axes ([3, 1, Q]; no row 0, so the explicit 4D mask is used as is).
- DeepStack: visual features of a few ViT layers are added to the hidden states of the
  first decoder layers at image-token positions. That happens inside the model's own
  forward when the prefill passes `pixel_values` + `image_grid_thw`; decode steps carry
  no image tokens, so nothing is injected there.
- Images: the checkpoint's image processor (`AutoImageProcessor`, which picks the PIL
  backend when torchvision is absent; `AutoProcessor` would need torchvision for its
  video processor) gives flattened patches `pixel_values` [n_patches, C*T*P*P] and
  `image_grid_thw` [1, 3]; the prompt's one image placeholder (`<|image_pad|>`) is
  expanded here to t*h*w / spatial_merge_size**2 tokens, as `Qwen3VLProcessor` does.
- Prompt: the checkpoint's chat template with one user turn [image, mode token] and the
  generation prompt (`<|im_start|>user\\n<|vision_start|><|image_pad|><|vision_end|><|tree|>
  <|im_end|>\\n<|im_start|>assistant\\n` for the Qwen template); without a chat template,
  `<|vision_start|><|image_pad|><|vision_end|>` + the mode token. A checkpoint may name its
  prompt per mode in `treedec_prompts.json` beside its weights (`{"crop": "Read the text."}`,
  any text, used instead of the mode token); a mode it neither names nor has a token for is
  one it cannot be asked in (`has_prompt`): HSD's stage 1 then reads its crops with the
  page prompt (`treedec.strategies.hsd`), other uses say so in one line.
- Tokens: treedec's serialization (`<BLOCK>`, `<FORK>`, `<CHILD>`, `<eos>`, category
  tokens `<|text_block|>` ...) and the prompt's mode token must each be one token of the
  checkpoint's tokenizer (added tokens, as a fine-tune on treedec's format has them).
  Missing ones are a `UserError` naming them: embeddings are never resized here.

Only the embedded engine runs these checkpoints: `Qwen3VL` is a `PageModel`, not a
`ServedPageModel` (`treedec.models.page_model`): `save` and the vLLM runtime work on
treedec's own VLM (their prompt does not depend on the image; this one does). Training:
`train model=qwen3_vl` (`treedec.training.qwen3_vl_trainer`, packing the same prompt and
positions in `treedec.training.qwen3_vl_packing`).
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Iterable

import torch
from PIL import Image

from treedec.errors import UserError
from treedec.models.adapter import CausalLMAdapter, Prompt, capture_hidden
from treedec.models.device import model_device
from treedec.models.vlm import MODES
from treedec.serialize import BLOCK, CATEGORY_TOKENS, CHILD, CONTROL, EOS, FORK

REQUIRED_TOKENS = (*CONTROL, *CATEGORY_TOKENS)  # what serialize/parse and the strategies emit and read
VISION_START, VISION_END = "<|vision_start|>", "<|vision_end|>"


class _Vocab(dict):
    """A tokenizer's vocabulary whose missing entries are a user error (a strategy asking
    for a token the checkpoint lacks, e.g. padoc_rows' `<tr>`)."""

    def __missing__(self, token: str) -> int:
        raise UserError(f"the checkpoint's tokenizer has no token {token!r} (treedec needs it as one added token)")


class CheckpointTokenizer:
    """treedec's tokenizer API (`encode`, `decode`, `vocab`, `eos_id`, `fork_id`, ...) over
    a checkpoint's transformers tokenizer (`hf`), treedec's control tokens looked up in
    it. `encode` adds no special tokens; `decode` keeps them and cleans up nothing, so
    `decode(encode(s)) == s` as treedec's own tokenizer."""

    def __init__(self, hf, image_id: int, vocab_size: int | None = None, where: str = "the checkpoint"):
        self.hf = hf
        self.vocab: dict[str, int] = _Vocab(hf.get_vocab())
        self.added = set(hf.get_added_vocab())
        missing = [t for t in REQUIRED_TOKENS if not self.is_token(t)]
        if missing:
            raise UserError(f"the tokenizer of {where} lacks treedec's tokens {' '.join(missing)}: each must be one "
                            "(added) token of a checkpoint fine-tuned on treedec's format")
        if vocab_size is not None and (big := [t for t in REQUIRED_TOKENS if self.vocab[t] >= vocab_size]):
            raise UserError(f"the tokenizer of {where} has {' '.join(big)} beyond the model's {vocab_size} embeddings")
        self.eos_id, self.block_id = self.vocab[EOS], self.vocab[BLOCK]
        self.fork_id, self.child_id = self.vocab[FORK], self.vocab[CHILD]
        self.image_id = image_id
        self.unk_id, self.bos_id = hf.unk_token_id, hf.bos_token_id
        self.pad_id = hf.pad_token_id if hf.pad_token_id is not None else self.eos_id

    def is_token(self, text: str) -> bool:
        """Whether `text` is an added token (one token wherever it occurs; a piece of the
        base vocabulary may merge with its neighbours)."""
        return text in self.added and self.encode(text) == [self.vocab[text]]

    def __len__(self) -> int:
        return len(self.hf)

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False))

    def decode(self, ids: Iterable[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def count(self, text: str) -> int:
        return len(self.encode(text))


def mrope_positions(model, ids: list[int], image_grid_thw: torch.Tensor, image_id: int) -> tuple[torch.Tensor, int]:
    """The prompt's rotary positions [3, 1, L] (t, h, w) and its rope delta, by the
    model's own `get_rope_index`."""
    x = torch.tensor([ids], dtype=torch.long)
    kwargs = {"image_grid_thw": image_grid_thw}
    if "mm_token_type_ids" in inspect.signature(model.model.get_rope_index).parameters:
        kwargs["mm_token_type_ids"] = (x == image_id).int()  # 0 text, 1 image
    pos, delta = model.model.get_rope_index(x, **kwargs)
    return pos, int(delta.reshape(-1)[0])


class Qwen3VLAdapter(CausalLMAdapter):
    """The engine's adapter for Qwen3-VL: prefill with the prompt's 3-D positions, steps
    with the engine's 1-D positions (page delta already added) on all three rotary axes.
    Inputs go to the model's device; logits come back as float on the CPU. Steps take the
    engine's dense mask (page-blocked attention is not wired for this model)."""

    supports_blocks = False

    def __init__(self, model: torch.nn.Module):
        super().__init__(model)
        self.device = next(model.parameters()).device

    @torch.inference_mode()
    def prefill(self, prompt: Prompt, hidden: bool = False):
        if "position_ids" not in prompt.inputs:
            raise ValueError("a Qwen3-VL prompt carries its mrope position_ids (build it with Qwen3VL.prompt)")
        cache = self.new_cache()
        ids = torch.tensor([prompt.ids], dtype=torch.long, device=self.device)
        inputs = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in prompt.inputs.items()}
        with capture_hidden(self.model, hidden) as cap:
            out = self.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1, **inputs)
        kv = [(layer.keys, layer.values) for layer in cache.layers]
        if hidden:
            return out.logits[0, -1].float().cpu(), kv, cap.rows[0, -1].float().cpu()
        return out.logits[0, -1].float().cpu(), kv

    @torch.inference_mode()
    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache,
             keep: torch.Tensor | None = None, hidden: bool = False):
        dev = self.device
        pos = positions.to(dev).view(1, 1, -1).expand(3, 1, -1)
        with capture_hidden(self.model, hidden) as cap:
            out = self.model(input_ids=ids[None].to(dev), position_ids=pos,
                             attention_mask=mask[None, None].to(dev, self.dtype), past_key_values=cache, use_cache=True,
                             logits_to_keep=keep.to(dev) if keep is not None else 0)
        if hidden:
            return out.logits[0].float().cpu(), cap.rows[0].float().cpu()
        return out.logits[0].float().cpu()


class Qwen3VL:
    """A Qwen3-VL checkpoint with treedec's tokenizer API: a `treedec.models.page_model.PageModel`
    (`prompt(image, mode)`, `adapter()`, `page_grid`); `pages` is None (no synthetic page
    distribution is known). Its prompt depends on the image (the image's token count and rope
    delta), so it is no `ServedPageModel`: no vLLM serving, no tiny-model training here
    (`train model=qwen3_vl` fine-tunes it with its own trainer)."""

    trainable = False  # `train` continues treedec's own VLM; model=qwen3_vl fine-tunes this one
    forced = False  # its tokens are its own

    def __init__(self, model: torch.nn.Module, tokenizer: CheckpointTokenizer, image_processor,
                 chat_template: str | None = None, directory: Path | None = None, prompts: dict[str, str] | None = None):
        self.model, self.tokenizer, self.image_processor = model, tokenizer, image_processor
        self.chat_template = chat_template
        self.prompts = dict(prompts or {})  # mode -> the checkpoint's own prompt text (`treedec_prompts.json`)
        self.merge = model.config.vision_config.spatial_merge_size
        self.pages = None
        self.directory = directory  # where files trained for this checkpoint lie beside it (an MTP head)

    def page_grid(self, image: Image.Image | None) -> int | None:
        """None: the image processor resizes every page (to multiples of patch x merge pixels
        within its pixel budget), so the model's patches fall on no fixed grid of the page's
        pixels; HSD then keeps the drafter's boxes and crops as they are."""
        return None

    def has_prompt(self, mode: str) -> bool:
        """Whether the checkpoint can be asked in `mode`: it names a prompt for it, or its
        tokenizer has the mode's token."""
        return mode in MODES and (mode in self.prompts or self.tokenizer.is_token(MODES[mode]))

    def mode_prompt(self, mode: str) -> str:
        """What the user turn says after the image: the checkpoint's prompt for `mode`, else the mode token."""
        if mode not in MODES:
            raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join(MODES)}")
        if not self.has_prompt(mode):
            raise UserError(f"the checkpoint's tokenizer lacks the prompt token {MODES[mode]} of mode {mode!r} and "
                            f"its {PROMPTS} names no prompt for it")
        return self.prompts.get(mode, MODES[mode])

    def prompt_text(self, mode: str) -> str:
        """The prompt with one image placeholder (expanded by `prompt`)."""
        token = self.mode_prompt(mode)
        image = self.tokenizer.hf.convert_ids_to_tokens(self.tokenizer.image_id)
        if not self.chat_template:
            return VISION_START + image + VISION_END + token
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": token}]}]
        return self.tokenizer.hf.apply_chat_template(messages, chat_template=self.chat_template, tokenize=False,
                                                     add_generation_prompt=True)

    def prompt(self, image: Image.Image, mode: str) -> Prompt:
        tok = self.tokenizer
        px = self.image_processor(images=[image.convert("RGB")], return_tensors="pt")
        grid = px["image_grid_thw"]
        n = int(grid[0].prod()) // self.merge ** 2
        ids = tok.encode(self.prompt_text(mode))
        if ids.count(tok.image_id) != 1:
            raise UserError(f"the prompt template gives {ids.count(tok.image_id)} image placeholders, not one")
        at = ids.index(tok.image_id)
        ids = ids[:at] + [tok.image_id] * n + ids[at + 1:]
        pos, delta = mrope_positions(self.model, ids, grid, tok.image_id)
        position_ids = torch.cat([torch.arange(len(ids)).view(1, 1, -1), pos])  # [4, 1, L]: index, t, h, w
        return Prompt(ids, {"pixel_values": px["pixel_values"], "image_grid_thw": grid, "position_ids": position_ids},
                      position_offset=delta)

    def adapter(self) -> Qwen3VLAdapter:
        return Qwen3VLAdapter(self.model)

    @classmethod
    def load(cls, directory: str | Path, attn: str = "sdpa", device: str | None = None) -> "Qwen3VL":
        """Load a Qwen3-VL checkpoint folder (config.json, weights, tokenizer, image
        processor config) onto `device` (default: CUDA when available, else CPU): in the
        checkpoint's dtype on CUDA, float32 on the CPU. Checks treedec's tokens before
        reading any weight."""
        from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer, Qwen3VLForConditionalGeneration

        d = Path(directory)
        try:
            config = AutoConfig.from_pretrained(d)
            hf_tok = AutoTokenizer.from_pretrained(d)
        except (OSError, ValueError, KeyError) as e:
            raise UserError(f"cannot load the Qwen3-VL checkpoint at {d}: {str(e).splitlines()[0]}") from None
        tok = CheckpointTokenizer(hf_tok, config.image_token_id, config.text_config.vocab_size, where=str(d))
        device = model_device(device)
        try:
            images = AutoImageProcessor.from_pretrained(d)
            model = Qwen3VLForConditionalGeneration.from_pretrained(
                d, attn_implementation=attn, dtype="auto" if device.type == "cuda" else torch.float32)
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as e:
            raise UserError(f"cannot load the Qwen3-VL checkpoint at {d}: {str(e).splitlines()[0]}") from None
        return cls(model.to(device).eval(), tok, images, chat_template(d, hf_tok), d, mode_prompts(d))


PROMPTS = "treedec_prompts.json"  # beside a checkpoint's weights: {mode: prompt text}


def mode_prompts(d: Path) -> dict[str, str]:
    """The prompts a checkpoint names per mode (`PROMPTS`; none when absent): a mode of
    `MODES` to the text its user turn says after the image."""
    f = d / PROMPTS
    if not f.is_file():
        return {}
    try:
        prompts = json.loads(f.read_text())
    except ValueError as e:
        raise UserError(f"{f} is not JSON: {e}") from None
    if not isinstance(prompts, dict) or not all(isinstance(v, str) and v for v in prompts.values()):
        raise UserError(f"{f} must map prompt modes to non-empty prompt texts, e.g. {{\"crop\": \"Read the text.\"}}")
    unknown = sorted(set(prompts) - set(MODES))
    if unknown:
        raise UserError(f"{f} names unknown prompt mode(s) {', '.join(unknown)}; modes: {', '.join(MODES)}")
    return prompts


def chat_template(d: Path, hf_tok) -> str | None:
    """The checkpoint's chat template: the tokenizer's, else the processor's
    (chat_template.json / chat_template.jinja), else None."""
    template = getattr(hf_tok, "chat_template", None)
    if isinstance(template, dict):  # named templates
        template = template.get("default")
    if template:
        return template
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text()
    if (d / "chat_template.json").is_file():
        return json.loads((d / "chat_template.json").read_text()).get("chat_template")
    return None
