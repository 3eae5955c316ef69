"""A transformers VLM checkpoint on the embedded engine, whatever its family (Qwen2-VL,
Qwen2.5-VL, Qwen3-VL, InternVL, ...: `treedec.models.families`): loaded by its own classes,
its own image processor (the PIL one; settings as its processor passes them), its own
tokenizer and chat template, never a prompt kept by hand.

- Prompt: the chat template with one user turn [image, instruction] and the generation
  prompt; the instruction of a prompt mode comes from `treedec.models.instructions` (the
  mode's token on a checkpoint with treedec's tokens, the model card's plain instruction
  otherwise, or the checkpoint's own `treedec_prompts.json`). The one image placeholder is
  expanded as the family's processor expands it, the positions computed as the family
  computes them (M-RoPE: the model's own `get_rope_index`; the page's rope delta travels
  to the engine as `Prompt.position_offset`, added to every decoded token's position).
- Adapter: any HF VLM whose language model takes input_ids, position_ids (1-D, or
  broadcast to the M-RoPE axes), a 4D additive mask and a `DynamicCache`.
- generation_config: its end-of-sequence ids end every stream; settings greedy decoding
  cannot honour losslessly are refused in one line (`treedec.models.generation`).
- No embedding is resized: a checkpoint lacking a token treedec needs says so in one line.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from PIL import Image

from treedec.errors import UserError
from treedec.formats.declare import declared_format
from treedec.models.adapter import CausalLMAdapter, Prompt, capture_hidden
from treedec.models.checkpoint_tokenizer import CheckpointTokenizer
from treedec.models.device import model_device
from treedec.models.families import FAMILIES, Family
from treedec.models.generation import end_ids
from treedec.models.instructions import has_instruction, instruction


class CheckpointAdapter(CausalLMAdapter):
    """The engine's adapter: prefill with the prompt's own inputs (pixels, positions), steps
    with the engine's 1-D positions (page delta already added), broadcast to `rope_axes`
    rotary axes. Inputs go to the model's device; logits come back as float on the CPU.
    Steps take the engine's dense mask (page-blocked attention is not wired for these)."""

    supports_blocks = False

    def __init__(self, model: torch.nn.Module, rope_axes: int = 1):
        super().__init__(model)
        self.rope_axes = rope_axes

    def prefill(self, prompt: Prompt, hidden: bool = False):
        logits, kv, *rest = super().prefill(prompt, hidden)  # the prompt's own inputs: pixels, positions
        return (logits.cpu(), kv, *(h.cpu() for h in rest))

    @torch.inference_mode()
    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache,
             keep: torch.Tensor | None = None, hidden: bool = False):
        dev = self.device
        pos = positions.to(dev)[None]
        if self.rope_axes > 1:
            pos = pos.view(1, 1, -1).expand(self.rope_axes, 1, -1)
        with capture_hidden(self.model, hidden) as cap:
            out = self.model(input_ids=ids[None].to(dev), position_ids=pos,
                             attention_mask=mask[None, None].to(dev, self.dtype), past_key_values=cache, use_cache=True,
                             logits_to_keep=keep.to(dev) if keep is not None else 0)
        if hidden:
            return out.logits[0].float().cpu(), cap.rows[0].float().cpu()
        return out.logits[0].float().cpu()


class CheckpointVLM:
    """A checkpoint of one of `FAMILIES` with treedec's tokenizer API: a
    `treedec.models.page_model.PageModel`; `pages` is None (no synthetic page distribution
    is known). Its prompt depends on the image, so it is no `ServedPageModel`."""

    trainable = False  # `train` continues treedec's own VLM; model=qwen3_vl fine-tunes a Qwen3-VL
    forced = False  # its tokens are its own

    def __init__(self, model: torch.nn.Module, tokenizer: CheckpointTokenizer, image_processor,
                 chat_template: str | None = None, directory: Path | None = None, prompts: dict[str, str] | None = None,
                 family: Family | None = None, fmt: str | None = None):
        self.model, self.tokenizer, self.image_processor = model, tokenizer, image_processor
        self.chat_template = chat_template
        self.prompts = dict(prompts or {})  # mode -> the checkpoint's own prompt text (`treedec_prompts.json`)
        self.family = family or FAMILIES[model.config.model_type]
        self.format = fmt  # `model.format`: passed along to the formats (`treedec.models.instructions`)
        self.pages = None
        self.directory = directory  # where files trained for this checkpoint lie beside it (an MTP head)

    def page_grid(self, image: Image.Image | None) -> int | None:
        """None: the image processor resizes every page, so the model's patches fall on no
        fixed grid of the page's pixels; HSD then keeps the drafter's boxes and crops as they are."""
        return None

    def has_prompt(self, mode: str) -> bool:
        tok = self.tokenizer
        return has_instruction(mode, tok.treedec_tokens, tok.is_token, self.prompts, self.format)

    def mode_prompt(self, mode: str, category: str | None = None) -> str:
        """What the user turn says after the image (`treedec.models.instructions.instruction`; a
        crop's `category`: the format's crop prompt for it)."""
        tok = self.tokenizer
        return instruction(mode, self.format, tok.treedec_tokens, tok.is_token, self.prompts, category)

    def prompt_text(self, mode: str, category: str | None = None) -> str:
        """The prompt by the checkpoint's chat template, with one image placeholder (expanded by `prompt`)."""
        return self.chat_text(mode_messages(self.mode_prompt(mode, category)))

    def chat_text(self, messages: list[dict]) -> str:
        """`messages` (transformers' chat form: content parts `{"type": "image"}` and `{"type": "text",
        "text": ...}`) through the checkpoint's chat template, with the generation prompt."""
        if not self.chat_template:
            raise UserError(f"the checkpoint at {self.directory} has no chat template (tokenizer_config.json, "
                            "chat_template.jinja or chat_template.json)")
        return self.tokenizer.hf.apply_chat_template(messages, chat_template=self.chat_template, tokenize=False,
                                                     add_generation_prompt=True)

    def image_inputs(self, image: Image.Image) -> dict:
        """The image processor's output for a page, with the settings the family's processor passes."""
        return dict(self.image_processor(images=[image.convert("RGB")], return_tensors="pt",
                                         **self.family.image_kwargs))

    @property
    def image_token(self) -> str:
        return self.tokenizer.hf.convert_ids_to_tokens(self.tokenizer.image_id)

    def prompt(self, image: Image.Image, mode: str, category: str | None = None) -> Prompt:
        """The chat template's prompt of one user turn [image, the mode's instruction]."""
        return self.chat_prompt(mode_messages(self.mode_prompt(mode, category)), image)

    def chat_prompt(self, messages: list[dict], image: Image.Image) -> Prompt:
        """The chat template's prompt of `messages` (`chat_text`; one image part), its image
        placeholder replaced as the family's processor replaces it (in the text, before
        tokenizing, as the processor does), its positions as the family computes them."""
        tok, fam = self.tokenizer, self.family
        px = self.image_inputs(image)
        text = self.chat_text(messages)
        if text.count(self.image_token) != 1:
            raise UserError(f"the chat template gives {text.count(self.image_token)} image placeholders, not one")
        ids = tok.encode(text.replace(self.image_token, fam.replacement(px, self), 1))
        extra, delta = fam.positions(self.model, ids, px, tok.image_id)
        inputs = {k: v for k, v in px.items() if k in fam.image_inputs}
        return Prompt(ids, {**inputs, **extra}, position_offset=delta)

    def generate_inputs(self, prompt: Prompt) -> dict:
        """What transformers' `generate` takes besides the prompt's ids for the same page
        (image inputs, `mm_token_type_ids` where the family takes them): `treedec.results.check`."""
        return self.family.generate_inputs(torch.tensor([prompt.ids]), prompt.inputs, self.tokenizer.image_id)

    def adapter(self) -> CheckpointAdapter:
        return CheckpointAdapter(self.model, self.family.rope_axes)

    @classmethod
    def load(cls, directory: str | Path, attn: str = "sdpa", device: str | None = None,
             fmt: str | None = None) -> "CheckpointVLM":
        """Load a checkpoint folder (config.json, weights, tokenizer, image processor config)
        onto `device` (default: CUDA when available, else CPU): in the checkpoint's dtype on
        CUDA, float32 on the CPU. Checks its tokens and generation_config before any weight."""
        import transformers
        from transformers import AutoConfig, AutoTokenizer

        d = Path(directory)
        fmt = fmt or declared_format(d)  # the format it is asked in: named, else the one it declares
        try:
            config = AutoConfig.from_pretrained(d)
            hf_tok = AutoTokenizer.from_pretrained(d)
        except (OSError, ValueError, KeyError) as e:
            raise UserError(f"cannot load the checkpoint at {d}: {str(e).splitlines()[0]}") from None
        family = FAMILIES[config.model_type]
        tok = CheckpointTokenizer(hf_tok, config.image_token_id, config.get_text_config().vocab_size, where=str(d),
                                  require=fmt == "treedec", eos_ids=end_ids(d))
        device = model_device(device)
        try:
            images = pil_image_processor(d)
            model = getattr(transformers, family.model_class).from_pretrained(
                d, attn_implementation=attn, dtype="auto" if device.type == "cuda" else torch.float32)
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as e:
            raise UserError(f"cannot load the checkpoint at {d}: {str(e).splitlines()[0]}") from None
        return cls(model.to(device).eval(), tok, images, chat_template(d, hf_tok), d, mode_prompts(d), family, fmt)


def mode_messages(text: str) -> list[dict]:
    """The one user turn a prompt mode asks in: the image, then the mode's instruction."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def pil_image_processor(d: Path):
    """The checkpoint's image processor, its PIL backend (PyPI's torchvision breaks beside CPU
    torch), by `AutoImageProcessor` once the PIL classes transformers wrongly gates on
    torchvision are registered (`use_pil_image_processors`: HunYuan-VL's)."""
    from transformers import AutoImageProcessor

    from treedec.models.pil_processors import use_pil_image_processors

    use_pil_image_processors()
    return AutoImageProcessor.from_pretrained(d, backend="pil")


PROMPTS = "treedec_prompts.json"  # beside a checkpoint's weights: {mode: prompt text}


def mode_prompts(d: Path) -> dict[str, str]:
    """The prompts a checkpoint names per mode (`PROMPTS`; none when absent): a mode of
    `MODES` to the text its user turn says after the image."""
    from treedec.models.vlm import MODES

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
    (chat_template.jinja / chat_template.json), else None."""
    template = hf_tok.chat_template  # None where the tokenizer has none
    if isinstance(template, dict):  # named templates
        template = template.get("default")
    if template:
        return template
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text()
    if (d / "chat_template.json").is_file():
        return json.loads((d / "chat_template.json").read_text()).get("chat_template")
    return None
