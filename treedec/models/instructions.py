"""What a checkpoint is asked: the user turn's text after the image for a prompt mode, in
one place. A checkpoint's own prompt for the mode (`treedec_prompts.json`) wins; a checkpoint
with treedec's tokens is asked with the mode's token (treedec's format); one whose format is
named (`model.format`, or the format its checkpoint declares) with that format's prompt
(`treedec.formats`: `Format.prompt`: the page and crop modes, and any other the format has, as
hpd's fork mode `document parsing with fork.`); any other with the plain instruction its model card gives (`PLAIN`: Markdown of the page; a crop's
text). Its raw output is read back by the run's format (`Strategy.parse`)."""
from __future__ import annotations

from treedec.errors import UserError
from treedec.formats import get_format
from treedec.formats.base import MODE_ALIASES
from treedec.models.vlm import MODES

# the plain instructions of a checkpoint without treedec's tokens (the model cards' shape)
PLAIN = {"flat": "Convert the document to markdown.", "crop": "Read the text in the image."}


def format_asks(fmt: str | None, mode: str) -> bool:
    """Whether format `fmt` (named, not treedec's) gives the prompt of `mode`: the page and crop
    modes always (a format without one says so in one line), any other where it has one."""
    return fmt not in (None, "treedec") and (mode in PLAIN or MODE_ALIASES.get(mode, mode) in get_format(fmt).prompts)


def has_instruction(mode: str, treedec_tokens: bool, has_token, prompts: dict[str, str], fmt: str | None = None) -> bool:
    """Whether a checkpoint can be asked in `mode` (`has_token(text)`: one token of its tokenizer)."""
    if mode in prompts or format_asks(fmt, mode):
        return True
    return has_token(MODES[mode]) if treedec_tokens else mode in PLAIN


def instruction(mode: str, fmt: str | None, treedec_tokens: bool, has_token, prompts: dict[str, str]) -> str:
    """The text of prompt mode `mode` for a checkpoint (see the module doc); `fmt` (the
    `model.format` config key) is passed along for the formats to answer."""
    if mode not in MODES:
        raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join(MODES)}")
    if not has_instruction(mode, treedec_tokens, has_token, prompts, fmt):
        what = f"lacks the prompt token {MODES[mode]}" if treedec_tokens else "has no treedec tokens"
        where = f"format {fmt!r} has none and " if fmt not in (None, "treedec") else ""
        raise UserError(f"the checkpoint's tokenizer {what} of mode {mode!r}, {where}its treedec_prompts.json names "
                        "no prompt for it")
    if mode in prompts:
        return prompts[mode]
    if format_asks(fmt, mode):  # the named format's own prompt
        return get_format(fmt).prompt(mode)
    return MODES[mode] if treedec_tokens else PLAIN[mode]

