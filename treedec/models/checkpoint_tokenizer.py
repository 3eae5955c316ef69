"""treedec's tokenizer API over a checkpoint's transformers tokenizer."""
from __future__ import annotations

from typing import Iterable

from treedec.errors import UserError
from treedec.formats.contract import BLOCK, CATEGORY_TOKENS, CHILD, CONTROL, EOS, FORK

REQUIRED_TOKENS = (*CONTROL, *CATEGORY_TOKENS)  # what the flat and tree forms (treedec.formats.contract) and strategies emit


class _Vocab(dict):
    """A tokenizer's vocabulary whose missing entries are a user error (a strategy asking
    for a token the checkpoint lacks, e.g. padoc_rows' `<tr>`)."""

    def __missing__(self, token: str) -> int:
        raise UserError(f"the checkpoint's tokenizer has no token {token!r} (treedec needs it as one added token)")


class CheckpointTokenizer:
    """treedec's tokenizer API (`encode`, `decode`, `vocab`, `eos_id`, `fork_id`, ...) over
    a checkpoint's transformers tokenizer (`hf`). `encode` adds no special tokens; `decode`
    keeps them and cleans up nothing, so `decode(encode(s)) == s`.

    With treedec's tokens (`treedec_tokens`: a fine-tune on treedec's format; `require`
    insists on them) its end is `<eos>` and `fork_id`, `block_id`, `child_id` are theirs;
    without, its end is the checkpoint's (`eos_ids`: generation_config's, all of them end a
    stream) and a fork token is the checkpoint's own where it is one added token (HPD-Parsing's
    `<FORK>`, `<CHILD>`), else asking for it is a one-line error."""

    def __init__(self, hf, image_id: int, vocab_size: int | None = None, where: str = "the checkpoint",
                 require: bool = True, eos_ids: Iterable[int] = ()):
        self.hf, self.where = hf, where
        self.vocab: dict[str, int] = _Vocab(hf.get_vocab())
        self.added = set(hf.get_added_vocab())
        missing = [t for t in REQUIRED_TOKENS if not self.is_token(t)]
        self.treedec_tokens = not missing
        if missing and require:
            raise UserError(f"the tokenizer of {where} lacks treedec's tokens {' '.join(missing)}: each must be one "
                            "(added) token of a checkpoint fine-tuned on treedec's format")
        if vocab_size is not None and self.treedec_tokens and \
                (big := [t for t in REQUIRED_TOKENS if self.vocab[t] >= vocab_size]):
            raise UserError(f"the tokenizer of {where} has {' '.join(big)} beyond the model's {vocab_size} embeddings")
        ends = [self.vocab[EOS]] if self.treedec_tokens else []
        for i in (*eos_ids, hf.eos_token_id):
            if i is not None and i not in ends:
                ends.append(i)
        if not ends:
            raise UserError(f"{where} names no end-of-sequence token (generation_config.json or the tokenizer's)")
        self.eos_id, self.eos_ids = ends[0], tuple(ends)
        self.image_id = image_id
        self.unk_id, self.bos_id = hf.unk_token_id, hf.bos_token_id
        self.pad_id = hf.pad_token_id if hf.pad_token_id is not None else self.eos_id

    def _control(self, token: str) -> int:
        """The id of a fork-protocol token: treedec's, or one added token of a checkpoint whose own
        format forks on it without the rest of treedec's tokens (HPD-Parsing's `<BLOCK>`,
        `<FORK>`, `<CHILD>`)."""
        if not (self.treedec_tokens or self.is_token(token)):
            raise UserError(f"the tokenizer of {self.where} has no treedec tokens and no {token} token: this strategy "
                            f"needs a checkpoint fine-tuned on a format that forks on {token} (treedec's or "
                            "HPD-Parsing's; try sequential or hsd)")
        return self.vocab[token]

    fork_id = property(lambda self: self._control(FORK))
    block_id = property(lambda self: self._control(BLOCK))
    child_id = property(lambda self: self._control(CHILD))

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
