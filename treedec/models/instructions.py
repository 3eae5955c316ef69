"""What a checkpoint is asked, and how its raw output is read back: one function each, so
that treedec's formats (`treedec.formats`: a format's `prompt(mode)` and `parse(text, w, h)`)
are wired in here and nowhere else.

- `instruction`: the user turn's text after the image for a prompt mode. A checkpoint's
  own prompt for the mode (`treedec_prompts.json`) wins; a checkpoint with treedec's
  tokens is asked with the mode's token (treedec's format); any other with the plain
  instruction its model card gives (`PLAIN`: Markdown of the page; a crop's text).
- `parse_output`: the raw output text (root stream, flattened) as a `ParseResult`.
"""
from __future__ import annotations

from treedec.errors import UserError
from treedec.models.vlm import MODES
from treedec.serialize import ParseResult, parse_flat

# the plain instructions of a checkpoint without treedec's tokens (the model cards' shape)
PLAIN = {"flat": "Convert the document to markdown.", "crop": "Read the text in the image."}


def has_instruction(mode: str, treedec_tokens: bool, has_token, prompts: dict[str, str]) -> bool:
    """Whether a checkpoint can be asked in `mode` (`has_token(text)`: one token of its tokenizer)."""
    if mode in prompts:
        return True
    return has_token(MODES[mode]) if treedec_tokens else mode in PLAIN


def instruction(mode: str, fmt: str | None, treedec_tokens: bool, has_token, prompts: dict[str, str]) -> str:
    """The text of prompt mode `mode` for a checkpoint (see the module doc); `fmt` (the
    `model.format` config key) is passed along for the formats to answer."""
    if mode not in MODES:
        raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join(MODES)}")
    if not has_instruction(mode, treedec_tokens, has_token, prompts):
        what = f"lacks the prompt token {MODES[mode]}" if treedec_tokens else "has no treedec tokens"
        raise UserError(f"the checkpoint's tokenizer {what} of mode {mode!r} and its treedec_prompts.json names no "
                        "prompt for it")
    if mode in prompts:
        return prompts[mode]
    return MODES[mode] if treedec_tokens else PLAIN[mode]


def parse_output(text: str, width: int, height: int, fmt: str | None = None, image_path: str = "") -> ParseResult:
    """The raw output `text` of a page read back into a page (treedec's flat form today;
    the formats' `parse` for `fmt` once they are wired in)."""
    return parse_flat(text, width, height, image_path=image_path)
