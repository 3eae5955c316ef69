"""What an output format is: how a page becomes a model's output text and back.

A format is a component of a model, like its tokenizer. It says
- `render(page)`: the page as the model writes it in one stream (the flat form), ending with
  the end marker the format writes as text (`eos_text`; "" where the tokenizer's own end token
  ends it); `render_tree(page)`: the tree form where the format has a fork protocol (`forks`);
- `parse(text, width, height)`: output text back into a `Page`, never raising: what it had to
  repair, or why nothing could be read, is in the result's `repairs` (the page's flags);
- `prompt(mode, category)`: the instruction of each mode (`page`, `tree`, `layout`, `crop`);
- its layout pass where it has one (`layout_mode`; `render_layout`, `read_layout`: `crops`' first
  stage) and what a crop read writes (`crop_text`, read back by `read_crop`: `crops`' second);
- `block_spans(text)`: where each block's content sits in the output (what drafts are matched
  against) and `content_text(block)`: how a block's content is written there (escaped);
- its coordinate convention (`coords`) and what it cannot express (`cannot_express`).

Formats register by name (`FORMATS`, a `treedec.registry.Registry`) as strategies do; each other file
of this package is one format. This module imports only plain data (page, contract, errors)."""
from __future__ import annotations

from typing import ClassVar

from treedec.errors import UserError
from treedec.formats.contract import FORK, ParseResult, TreeText
from treedec.page import Block, Page
from treedec.registry import Registry

MODES = ("page", "tree", "layout", "crop")
MODE_ALIASES = {"flat": "page"}  # treedec's own name of the page mode


class Format:
    """The base every format shares: capabilities as class attributes, the never-raising `parse`
    around a format's own `read`, and the prompt lookup. A format sets `name`, its capabilities,
    `prompts` (mode -> text) and `crop_prompts` (category -> text; `crop_prompts[None]` is the
    default), and defines `render`, `read` and `block_spans`."""

    name: ClassVar[str] = ""
    forks: ClassVar[bool] = False  # has a fork protocol (a tree form): fork strategies serve it
    block_text: ClassVar[bool] = True  # each block's text sits in the output: hsd serves it
    boxes: ClassVar[bool] = True  # writes each block's box
    two_stage: ClassVar[bool] = False  # layout from a layout pass or a detector, then crop reads
    scored_as_markdown: ClassVar[bool] = False  # its output is scored as OmniDocBench scores Markdown
    detector_layout: ClassVar[bool] = False  # two-stage with its layout from a separate detector (no layout prompt)
    cannot_express: ClassVar[tuple[str, ...]] = ()  # human-readable
    coords: ClassVar[str] = ""  # the coordinate convention, in words
    eos_text: ClassVar[str] = ""  # the end marker written as text ("": the tokenizer's end token)
    prompts: ClassVar[dict[str, str]] = {}
    crop_prompts: ClassVar[dict[str | None, str]] = {}

    # --- writing
    def render(self, page: Page) -> str:
        raise NotImplementedError

    def render_tree(self, page: Page) -> TreeText:
        raise UserError(f"format {self.name!r} has no fork protocol; formats with one: {', '.join(serving('forks'))}")

    def content_text(self, block: Block) -> str:
        """A block's content as the output writes it (escaped where the format escapes)."""
        return block.content

    def crop_text(self, block: Block) -> str:
        """What a crop read of `block`'s region outputs (without the end token)."""
        return block.content

    def read_crop(self, text: str, category: str) -> str:
        """A region's content (as a `Block` holds it) from what its crop read output (`crop_text`'s
        inverse: a table written as OTSL back to HTML)."""
        return text

    @property
    def layout_mode(self) -> str | None:
        """The prompt mode of its layout pass (`crops`' first stage): `tree` (a fork protocol's
        layout stream, its branches not decoded), `layout` (a layout prompt), or None: its layout
        comes from a detector (the pipeline drafter's; the ground truth's regions under forcing)."""
        return "tree" if self.forks else "layout" if "layout" in self.prompts else None

    def render_layout(self, page: Page) -> str:
        """The layout pass's output for `page` (its end token left to `encode`)."""
        if not self.forks:
            raise UserError(f"format {self.name!r} has no layout pass (its layout comes from a detector)")
        return self.render_tree(page).layout

    def read_layout(self, text: str, width: int, height: int) -> ParseResult:
        """The regions a layout pass wrote (`render_layout`'s output): blocks without content."""
        result = self.parse(text.replace(FORK, ""), width, height)
        for b in result.page.blocks:
            b.content = ""
        return result

    def encode(self, tok, text: str) -> list[int]:
        """`text`'s token ids under `tok`, ended by the tokenizer's end token where the format
        writes no end marker as text (treedec's `<eos>` is its tokenizer's end token)."""
        return tok.encode(text) + ([] if self.eos_text else [tok.eos_id])

    # --- reading
    def parse(self, text: str, width: int = 1000, height: int = 1000, image_path: str = "") -> ParseResult:
        """The page in `text`; never raises (a reader's failure gives an empty page, flagged)."""
        try:
            return self.read(text, width, height, image_path)
        except Exception as e:  # garbled output is the model's, never the caller's crash
            page = Page(width=max(1, int(width)), height=max(1, int(height)), image_path=image_path)
            return ParseResult(page, [f"{self.name} output could not be read ({type(e).__name__}: {e}): empty page"])

    def read(self, text: str, width: int, height: int, image_path: str) -> ParseResult:
        raise NotImplementedError

    def block_spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets of each block's content in `text`, in output order."""
        raise NotImplementedError

    # --- asking
    def prompt(self, mode: str, category: str | None = None) -> str:
        mode = MODE_ALIASES.get(mode, mode)
        if mode == "crop" and self.crop_prompts:
            return self.crop_prompts.get(category, self.crop_prompts[None])
        if mode not in self.prompts:
            raise UserError(f"format {self.name!r} has no prompt for mode {mode!r}; its modes: "
                            f"{', '.join([*self.prompts, *(['crop'] if self.crop_prompts else [])])}")
        return self.prompts[mode]

    def has_prompt(self, mode: str) -> bool:
        """Whether the format names a prompt for `mode` (`crop`: a crop prompt, for any category)."""
        return bool(self.crop_prompts) if mode == "crop" else MODE_ALIASES.get(mode, mode) in self.prompts

    @property
    def baseline(self) -> str:
        """The strategy a job in this format is measured against: `crops` where the format reads
        crops only (two-stage), else `sequential`."""
        return "crops" if self.two_stage else "sequential"

    def describe(self) -> str:
        caps = [c for c in ("forks", "block_text", "boxes", "two_stage") if getattr(self, c)]
        return f"{', '.join(caps) or '-'}; coords: {self.coords or 'none'}"


FORMATS: Registry[type[Format]] = Registry("format", "treedec.formats", "treedec.formats")


def get_format(name: str) -> Format:
    """The registered format `name` (a one-line UserError with a did-you-mean when unknown)."""
    return FORMATS.get(name)()


def serving(capability: str) -> list[str]:
    """The names of the formats that have `capability` (a capability attribute of `Format`)."""
    return [n for n in FORMATS.names() if getattr(FORMATS.get(n), capability)]


def require(fmt: Format, capability: str, strategy: str) -> None:
    """Refuse, in one line, a strategy that needs `capability` on a format without it."""
    if not getattr(fmt, capability):
        why = {"forks": "a fork protocol", "block_text": "each block's text in the output"}.get(capability, capability)
        raise UserError(f"strategy={strategy} needs {why}, which format {fmt.name!r} lacks; "
                        f"formats that serve it: {', '.join(serving(capability))}")


def resolve_format(given: str | None, declared: str | None, has_treedec_tokens: bool) -> str:
    """The format a model writes: `model.format` when given; else what the checkpoint declares
    (its `treedec_format` entry); else `treedec` when it has treedec's tokens; else a one-line
    request to name it (never a silent guess)."""
    for name in (given, declared):
        if name:
            FORMATS.get(name)
            return name
    if has_treedec_tokens:
        return "treedec"
    raise UserError("this checkpoint declares no output format and has no treedec tokens: name it with "
                    f"model.format=NAME (one of {', '.join(FORMATS.names())})")
