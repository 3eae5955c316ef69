"""A real VLM's byte-level BPE tokenizer with treedec's control tokens added (one token
each, as a checkpoint fine-tuned on treedec's format has them), for measuring what the
tokenizer does to depth: `python -m treedec depth tokenizer=PATH`.

PATH is a `tokenizer.json`, a checkpoint directory holding one, or a tiktoken rank file
(`*.tiktoken`: one `base64(token bytes) rank` a line), split with Qwen's pre-tokenizer
pattern (single digits, so a box's digits cost one token each, as in treedec's own
tokenizer). Qwen's `qwen.tiktoken` (151,643 tokens) is the vocabulary Qwen2 and Qwen3 kept;
`experiments/tokenizer_depth.py` takes it from the pinned dashscope wheel on PyPI."""
from __future__ import annotations

import base64
import binascii
from pathlib import Path

from treedec.errors import UserError
from treedec.models.checkpoint_tokenizer import REQUIRED_TOKENS, CheckpointTokenizer
from treedec.tokenizer import IMAGE

ROW_TAGS = ("<tr>", "</tr>")  # table_rows forks at them: a fine-tune for it adds them as tokens
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def read_tiktoken(path: Path) -> dict[bytes, int]:
    """A tiktoken rank file's token bytes -> rank."""
    ranks: dict[bytes, int] = {}
    for n, line in enumerate(path.read_text(encoding="ascii", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        token, _, rank = line.partition(" ")
        try:
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise UserError(f"{path}:{n}: not a tiktoken rank line ('base64 rank'): {line[:60]!r}") from None
    if not ranks:
        raise UserError(f"{path}: no tiktoken rank lines")
    return ranks


def tiktoken_to_hf(ranks: dict[bytes, int], pattern: str = QWEN_PATTERN):
    """A `tokenizers.Tokenizer` (byte-level BPE) of tiktoken ranks, by transformers' converter
    (merges recovered from the ranks), reading the ranks given instead of a file."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class _Converter(TikTokenConverter):
        def load_tiktoken_bpe(self, _url):
            return ranks

    return _Converter(vocab_file="<ranks>", pattern=pattern).converted()


def bpe_tokenizer(path: str | Path, extra: tuple[str, ...] = ()) -> CheckpointTokenizer:
    """treedec's tokenizer API over the BPE at `path` (see the module's doc), treedec's
    control and category tokens, `<image>` and `extra` (e.g. table_rows' `<tr>`, `</tr>`)
    added as special tokens where it lacks them."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import PreTrainedTokenizerFast

    path = Path(path).expanduser()
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"tokenizer={path}: no such file (a tokenizer.json, a directory holding one, or a .tiktoken file)")
    if file.suffix == ".tiktoken":
        hf = tiktoken_to_hf(read_tiktoken(file))
    else:
        try:
            hf = HFTokenizer.from_file(str(file))
        except Exception as e:  # tokenizers raises a bare Exception on a malformed file
            raise UserError(f"tokenizer={file}: not a tokenizers JSON file ({str(e)[:120]})") from None
    added = {t.content for t in hf.get_added_tokens_decoder().values()}
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t in (*REQUIRED_TOKENS, IMAGE, *extra) if t not in added])
    fast = PreTrainedTokenizerFast(tokenizer_object=hf)
    return CheckpointTokenizer(fast, image_id=fast.convert_tokens_to_ids(IMAGE), where=str(file))
