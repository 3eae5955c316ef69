"""The replicas' tokenizer: a small byte-level BPE in the shape of Qwen's (Qwen's
pre-tokenizer pattern: single digits; byte-level, so any text encodes), trained with
`tokenizers` on a short fixed corpus in seconds, plus the family's special tokens and,
for `fmt="treedec"`, treedec's control, category and prompt-mode tokens (one token each,
as a checkpoint fine-tuned on treedec's format has them)."""
from __future__ import annotations

import string

from treedec.models.bpe_tokenizer import QWEN_PATTERN
from treedec.models.vlm import MODES
from treedec.serialize import CATEGORY_TOKENS, CONTROL

TREEDEC_TOKENS = (*CONTROL, *CATEGORY_TOKENS, *MODES.values())
CORPUS = (  # what document pages hold: prose, numbers, Markdown, HTML tables, LaTeX, boxes
    "The quick brown fox jumps over the lazy dog. Convert the document to markdown.",
    "# Introduction\n\nDocument parsing turns a page image into text, tables and formulas.",
    "<table><tr><td>Year</td><td>Revenue</td></tr><tr><td>2024</td><td>1,234.5</td></tr></table>",
    "$$ E = m c^{2} \\quad \\frac{a}{b} + \\sum_{i=1}^{n} x_i $$",
    "[12, 40, 988, 120] text title table figure caption header footer page number",
    string.ascii_letters + string.digits + string.punctuation,
)


def train_bpe(special: tuple[str, ...], fmt: str | None, vocab: int = 600):
    """A transformers fast tokenizer: the BPE (about `vocab` tokens) + `special` (the family's
    chat and vision tokens, in order: the first is id len(BPE)) + treedec's tokens for
    `fmt="treedec"`. No chat template or named tokens yet (the family sets them)."""
    from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, trainers
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = HFTokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(list(CORPUS) * 4, trainer)
    extra = TREEDEC_TOKENS if fmt == "treedec" else ()
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in (*special, *extra)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe)
