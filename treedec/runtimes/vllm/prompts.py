"""A page's prompt on the vLLM runtime: the ids the decoding graph's root holds (the image
expanded, as the embedded engine feeds them) and the same prompt as vLLM is given it (one
image placeholder, which vLLM's processor for the architecture expands into those very ids:
`tests/test_vllm_archs.py` checks it per family). A stream's request is its ancestor context
with the first folded into the second (`fold`).

Two kinds of model: treedec's own VLM (`ServedPageModel`: its prompt is the image's tokens
then the mode token, one `<image>` for vLLM, the page on its square canvas) and a
checkpoint of a real architecture (anything with the chat-template prompt `prompt_text(mode, category)`
and the image-expanded `prompt(image, mode, category)`: `treedec.models.checkpoint_vlm.CheckpointVLM`),
served from its own folder, the page given to vLLM's processor as it is. A crop's `category`
(`Sample.category`, its region's) is asked of both, as the embedded engine asks it
(`EmbeddedRuntime.prompt`): a format's crop prompt per category (paddleocr's `Table Recognition:`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from treedec.errors import UserError
from treedec.models.page_model import ChatPageModel, ServedPageModel


@dataclass
class PagePrompt:
    ids: list[int]  # the root stream's prompt, image expanded (what the graph holds)
    served: list[int]  # the same prompt with one image placeholder (what vLLM is given)
    image: Any  # the page as vLLM's processor takes it


def page_prompt(vlm, mode: str, image: Image.Image, category: str | None = None) -> PagePrompt:
    if isinstance(vlm, ServedPageModel):
        from treedec.models.vlm import canvas

        ids = vlm.prompt_ids(mode)  # no prompt of treedec's own VLM depends on a crop's category
        return PagePrompt(ids, [vlm.tokenizer.image_id, *ids[-1:]], canvas(image, vlm.spec.image_size))
    image = image.convert("RGB")
    return PagePrompt(vlm.prompt(image, mode, category).ids, text_prompt_ids(vlm, mode, category), image)


def text_prompt_ids(vlm, mode: str, category: str | None = None) -> list[int]:
    """Prompt ids whose tail (past the image) is every page's (every crop's of `category`):
    what HSD's root drafts are prefixed with (`hsd.write_drafts`)."""
    if isinstance(vlm, ServedPageModel):
        return vlm.prompt_ids(mode)
    return vlm.tokenizer.encode(vlm.prompt_text(mode, category))


def fold(prompt: PagePrompt, context: list[int], image_id: int) -> list[int] | None:
    """A stream's ancestor `context` as vLLM is given it; None when it cannot be (the context
    does not start with the page's prompt, or holds an image placeholder after it, which
    vLLM's processor would take for a second image)."""
    n = len(prompt.ids)
    if context[:n] != prompt.ids or image_id in context[n:]:
        return None
    return prompt.served + context[n:]


def stop_ids(tokenizer) -> list[int]:
    """Every id that ends a stream (a checkpoint's generation_config may name several)."""
    return list(tokenizer.eos_ids)


def checkpoint_folder(vlm) -> Path:
    """The folder vLLM serves a real architecture's checkpoint from: its own (one line if none)."""
    if not isinstance(vlm, ChatPageModel) or vlm.directory is None:
        raise UserError(f"runtime=vllm serves treedec's VLM and checkpoints loaded by model_type from a folder "
                        f"(their chat-template prompt, `prompt_text`); {type(vlm).__name__} has no such prompt: use "
                        "runtime=embedded")
    return Path(vlm.directory)
