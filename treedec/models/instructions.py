"""What a checkpoint is asked: the user turn's text after the image for a prompt mode, in
one place. A checkpoint's own prompt for the mode (`treedec_prompts.json`) wins; one whose format
is named (`model.format`, not treedec's) with that format's prompt (`treedec.formats`:
`Format.prompt`, e.g. hpd's fork mode `document parsing with fork.`; a crop's per category where
the format has one; a mode the format names no prompt for, e.g. a crop in Markdown, it cannot be
asked in: HSD's stage 1 and `crops` then read the crop with the page prompt); a checkpoint with
treedec's tokens with the mode's token (treedec's format; its layout pass, `layout`, is its tree
mode's layout stream); any other with the plain instruction its model card gives (`PLAIN`:
Markdown of the page; a crop's text). Its raw output is read back by the run's format
(`Strategy.parse`)."""
from __future__ import annotations

from treedec.errors import UserError
from treedec.formats import get_format
from treedec.models.vlm import MODES

# the plain instructions of a checkpoint without treedec's tokens (the model cards' shape)
PLAIN = {"flat": "Convert the document to markdown.", "crop": "Read the text in the image."}
FORMAT_MODES = ("flat", "tree", "layout", "crop")  # the modes a named format answers (`Format.prompt`)
LAYOUT_AS = {"layout": "tree"}  # treedec's layout pass: its tree mode's layout stream


def _named(fmt: str | None, mode: str) -> bool:
    return fmt not in (None, "treedec") and mode in FORMAT_MODES


def has_instruction(mode: str, treedec_tokens: bool, has_token, prompts: dict[str, str], fmt: str | None = None) -> bool:
    """Whether a checkpoint can be asked in `mode` (`has_token(text)`: one token of its tokenizer;
    `fmt`: the `model.format` config key)."""
    if mode in prompts:
        return True
    if _named(fmt, mode):
        return get_format(fmt).has_prompt(mode)
    mode = LAYOUT_AS.get(mode, mode)
    return has_token(MODES[mode]) if treedec_tokens else mode in PLAIN


def instruction(mode: str, fmt: str | None, treedec_tokens: bool, has_token, prompts: dict[str, str],
                category: str | None = None) -> str:
    """The text of prompt mode `mode` for a checkpoint (see the module doc); `fmt` (the
    `model.format` config key) is passed along for the formats to answer, with a crop's
    `category` (its region's: a format's crop prompt per category)."""
    if LAYOUT_AS.get(mode, mode) not in MODES:
        raise UserError(f"unknown prompt mode {mode!r}; modes: {', '.join([*MODES, *LAYOUT_AS])}")
    if not has_instruction(mode, treedec_tokens, has_token, prompts, fmt):
        what = (f"format {fmt!r} names no prompt" if _named(fmt, mode) else
                f"tokenizer lacks the prompt token {MODES[LAYOUT_AS.get(mode, mode)]}" if treedec_tokens
                else "tokenizer has no treedec tokens")
        raise UserError(f"the checkpoint's {what} of mode {mode!r} and its treedec_prompts.json names no "
                        "prompt for it")
    if mode in prompts:
        return prompts[mode]
    if _named(fmt, mode):  # the named format's own prompt
        return get_format(fmt).prompt(mode, category)
    return MODES[LAYOUT_AS.get(mode, mode)] if treedec_tokens else PLAIN[mode]

