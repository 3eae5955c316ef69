"""A request's messages as the model's prompt, and which of the model's prompt modes the request
asks for (`Prompts`: the text of its user turn against every prompt the model and its format
name: a page, a layout pass, a crop of one category).

- A checkpoint with a chat template (`CheckpointVLM`): the request is the prompt. Its messages go
  through the checkpoint's own chat template and image processor as they are (a system turn,
  the image before or after the text), one image per request. A page request to a fork strategy
  is asked in the strategy's own mode instead (PaDoc's `tree` prompt in place of the page
  prompt: the answer is the branches spliced into the page).
- treedec's own VLM and the forced decoder have no chat template: their prompt is a mode's
  (`PageModel.prompt`), so a request must ask in one of them; a system turn is accepted, not
  part of the prompt.

The mode decides what a strategy drafts (`treedec.serve.drafts`) and, under forcing, what the
request is answered with (`treedec.serve.forced_pages`); a prompt no mode matches decodes as
asked, without pipeline drafts (a checkpoint), or is refused in a 400 listing the prompts the
model knows (a model without a chat template)."""
from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from treedec.errors import UserError
from treedec.formats import Format
from treedec.models.adapter import Prompt
from treedec.models.page_model import ChatPageModel
from treedec.serve.errors import bad
from treedec.serve.images import read_image
from treedec.serve.protocol import ChatRequest, content_parts

MODES = ("flat", "tree", "layout", "crop")  # the modes a request can ask for, in the order their texts are matched


@dataclass
class Asked:
    """What a request asks: its image, its turns in transformers' chat form (the image a
    `{"type": "image"}` part), the text of its user turn, and the prompt mode and crop category
    that text is (None: no mode of the model's)."""
    image: Image.Image
    messages: list[dict]
    text: str
    mode: str | None = None
    category: str | None = None

    @property
    def page(self) -> bool:
        return self.mode in ("flat", "tree")


class Prompts:
    """The model's prompt modes by their text (stripped): `flat`, `tree`, `layout`, and `crop`
    for each category the format has a crop prompt for (its default: None)."""

    def __init__(self, vlm, fmt: Format):
        self.vlm, self.fmt = vlm, fmt
        self.known: dict[str, tuple[str, str | None]] = {}
        for mode in MODES:
            if not vlm.has_prompt(mode):
                continue
            for category in ([None, *(c for c in fmt.crop_prompts if c)] if mode == "crop" else [None]):
                try:
                    text = vlm.mode_prompt(mode, category)
                except UserError:
                    continue
                self.known.setdefault(text.strip(), (mode, category))
        self.chat = isinstance(vlm, ChatPageModel)  # a checkpoint with a chat template

    def match(self, text: str) -> tuple[str | None, str | None]:
        return self.known.get(text.strip(), (None, None))

    def listing(self) -> str:
        return ", ".join(repr(t) for t in self.known)

    def read(self, req: ChatRequest, max_pixels: int) -> Asked:
        """The request's image, turns and mode; a 400 naming the field where it has no image,
        more than one, or (a model without a chat template) a text no mode of the model's is."""
        image, image_at, turns, user_text = None, None, [], []
        for role, i, parts in content_parts(req):
            content = []
            for kind, value, where in parts:
                if kind == "image":
                    if image is not None:
                        raise bad(where, f"one image per request (the first is at {image_at})")
                    image, image_at = read_image(value, where, max_pixels), where
                    content.append({"type": "image"})
                else:
                    content.append({"type": "text", "text": value})
                    if role == "user":
                        user_text.append(value)
            turns.append({"role": "system" if role == "developer" else role, "content": content})
        if image is None:
            raise bad("messages", "no image: a request parses one page or crop, given as an image_url part")
        text = "".join(user_text)
        mode, category = self.match(text)
        if mode is None and not self.chat:
            raise bad("messages", f"this model is asked in its prompt modes only; the user's text must be one of "
                                  f"{self.listing()} (got {text[:60]!r})")
        return Asked(image, turns, text, mode, category)

    def prompt(self, asked: Asked, mode: str) -> Prompt:
        """The prompt of `asked`, in `mode` (the request's own, or the strategy's for a page
        request to a fork strategy)."""
        if not self.chat:
            return self.vlm.prompt(asked.image, mode, asked.category)
        messages = asked.messages
        if mode != asked.mode:  # the strategy's instruction in place of the request's text
            messages = with_text(messages, self.vlm.mode_prompt(mode, asked.category))
        return self.vlm.chat_prompt(messages, asked.image)


def with_text(messages: list[dict], text: str) -> list[dict]:
    """The turns with the user turn that holds the image saying `text` instead of its own text
    (one text part, where its first text part was)."""
    out = []
    for m in messages:
        parts = m["content"]
        if m["role"] == "user" and any(p["type"] == "image" for p in parts):
            kept, placed = [], False
            for p in parts:
                if p["type"] != "text":
                    kept.append(p)
                elif not placed:
                    kept.append({"type": "text", "text": text})
                    placed = True
            if not placed:
                kept.append({"type": "text", "text": text})
            m = {**m, "content": kept}
        out.append(m)
    return out
