"""What the runtimes and strategies need of a model, as small protocols; each model kind
is an adapter class implementing them, picked by `treedec.models.loader` from a
checkpoint's `model_type` (`idefics3`: `treedec.models.vlm.VLM`, treedec's own;
`qwen3_vl`: `treedec.models.qwen3_vl.Qwen3VL`). No model kind inherits methods it cannot
honour: a capability it lacks is a protocol it does not implement, and whoever needs that
capability says so in one line (`runtime=vllm` on a Qwen3-VL checkpoint, `train` on one).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from PIL import Image

from treedec.models.adapter import CausalLMAdapter, Prompt


@runtime_checkable
class PageModel(Protocol):
    """A model that parses page images on the embedded engine, with every strategy."""

    model: Any  # the torch module (an MTP head binds to its embeddings and LM head)
    tokenizer: Any  # treedec's tokenizer API: encode, decode, vocab, eos_id, fork_id, child_id, image_id, treedec_tokens
    pages: dict | None  # the synthetic page distribution it was trained on (run's default data); None: unknown
    directory: Path | None  # the checkpoint folder it was loaded from (files trained for it lie beside it)
    trainable: bool  # `python -m treedec train` continues it
    forced: bool  # every token forced to the page's ground truth (treedec.models.forced); its adapter says so too

    def prompt(self, image: Image.Image, mode: str, category: str | None = None) -> Prompt:
        """What the engine prefills for a page in prompt mode `mode` (flat, tree, crop, ...); a
        crop's `category` (its region's) where the model's crop prompt depends on it."""

    def mode_prompt(self, mode: str, category: str | None = None) -> str:
        """The text the model is asked after the image in `mode` (its token, a format's prompt, a
        checkpoint's instruction): what a served request's text is matched against (`treedec.serve`)."""

    def has_prompt(self, mode: str) -> bool:
        """Whether the model can be asked in prompt mode `mode` (a checkpoint trained without
        crops has no `crop` prompt: HSD's stage 1 then reads a crop as a page)."""

    def adapter(self) -> CausalLMAdapter:
        """The engine's view of the model: prefill and flat tree-masked steps."""

    def page_grid(self, image: Image.Image | None) -> int | None:
        """The model's patch grid in `image`'s pixels (HSD snaps draft boxes and crops to it);
        None when the model has none there (it resizes the image)."""


@runtime_checkable
class ChatPageModel(PageModel, Protocol):
    """A page model with a chat template: any conversation with one image is a prompt (a served
    request's messages as they are: `treedec.serve`)."""

    def chat_prompt(self, messages: list[dict], image: Image.Image) -> Prompt:
        """The prompt of `messages` (transformers' chat form; one `{"type": "image"}` part) on `image`."""

    def prompt_text(self, mode: str, category: str | None = None) -> str:
        """The prompt of `mode` by the chat template, as text with one image placeholder (what
        vLLM is given: `treedec.runtimes.vllm.prompts`)."""


@runtime_checkable
class GeneratingPageModel(PageModel, Protocol):
    """A page model on a transformers model whose `generate` decodes it as the reference
    (`python -m treedec check`)."""

    def generate_inputs(self, prompt: Prompt) -> dict:
        """What transformers' `generate` takes besides the prompt's ids."""


@runtime_checkable
class ServedPageModel(PageModel, Protocol):
    """A page model whose prompt does not depend on the image beyond one image placeholder,
    saved as a folder vLLM serves and treedec's trainer packs: `runtime=vllm`, `train`."""

    spec: Any  # sizes (image size, image tokens, positions): treedec.models.vlm.VLMSpec

    def prompt_ids(self, mode: str) -> list[int]:
        """The prompt's token ids, the image expanded to its tokens."""

    def save(self, directory: str | Path) -> Path:
        """Write a checkpoint folder vLLM can serve and `load_model` reads back."""

