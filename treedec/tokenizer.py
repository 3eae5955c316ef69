"""The project tokenizer: one token per character plus control tokens.

Built on HF `tokenizers` (WordLevel over single characters, control tokens as added
tokens) so it saves as a standard `tokenizer.json` beside a checkpoint and loads in
transformers and vLLM. Characters outside the vocabulary become `<unk>` (one token each,
so token counts stay character counts even on real pages in other scripts).
"""
from __future__ import annotations

import string
from pathlib import Path
from typing import Iterable, Sequence

from treedec.formats.contract import BLOCK, CATEGORY_TOKENS, CHILD, EOS, FORK

PAD, UNK, BOS, IMAGE = "<pad>", "<unk>", "<bos>", "<image>"
# HTML table tags as single tokens: tables are long and mostly tags.
TABLE_TAGS = ("<table>", "</table>", "<thead>", "</thead>", "<tbody>", "</tbody>", "<tr>", "</tr>",
              "<td>", "</td>", "<th>", "</th>", "<td", "<th", ' colspan="', ' rowspan="')
DEFAULT_CHARSET = string.digits + string.ascii_letters + string.punctuation + " \n"


class Tokenizer:
    """Character tokenizer with treedec's control tokens; `hf` is the underlying
    `tokenizers.Tokenizer`."""

    treedec_tokens = True  # it always has treedec's tokens (`CheckpointTokenizer.treedec_tokens`: a checkpoint's may not)

    def __init__(self, charset: str = DEFAULT_CHARSET, extra_special: Sequence[str] = ()) -> None:
        from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer

        self.special = [PAD, EOS, UNK, BOS, IMAGE, BLOCK, FORK, CHILD, *CATEGORY_TOKENS, *extra_special]
        self.tags = list(TABLE_TAGS)
        chars = list(dict.fromkeys(charset))
        vocab = {t: i for i, t in enumerate([*self.special, *self.tags, *chars])}
        hf = HFTokenizer(models.WordLevel(vocab, unk_token=UNK))
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        hf.decoder = decoders.Fuse()
        hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in self.special])
        hf.add_tokens([AddedToken(t, special=False, normalized=False) for t in self.tags])
        self._init(hf)

    def _init(self, hf) -> None:
        self.hf = hf
        self.vocab = hf.get_vocab()
        self.pad_id, self.eos_id, self.unk_id = self.vocab[PAD], self.vocab[EOS], self.vocab[UNK]
        self.eos_ids = (self.eos_id,)  # every id that ends a stream (a checkpoint's tokenizer may have several)
        self.bos_id, self.image_id = self.vocab[BOS], self.vocab[IMAGE]
        self.block_id, self.fork_id, self.child_id = self.vocab[BLOCK], self.vocab[FORK], self.vocab[CHILD]

    def __len__(self) -> int:
        return self.hf.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / "tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.hf.save(str(path))
        return path

    @classmethod
    def load(cls, directory: str | Path) -> "Tokenizer":
        from tokenizers import Tokenizer as HFTokenizer

        path = Path(directory)
        path = path / "tokenizer.json" if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer.json at {path}")
        self = cls.__new__(cls)
        self._init(HFTokenizer.from_file(str(path)))
        return self
