"""What every tiny replica shares: a small byte-level BPE trained with `tokenizers` on a
fixed text (the same merges on every machine), a checkpoint folder written the way a real
one ships (config.json, safetensors weights, tokenizer with the family's chat template, the
image processor's config, generation_config.json), and a random model built from a config
with weights wide enough that greedy decoding does not sit on ties."""
from __future__ import annotations

from pathlib import Path
from typing import Any

# The BPE's training text: the kinds of output a document parser writes (Markdown, HTML
# tables, LaTeX, DocTags-like tags, boxes), so its merges look like a real tokenizer's.
CORPUS = """# Annual report 2024
The committee met on 12 March and approved the budget of 4,250 units for the coming year.
## Results
Revenue grew by 7.5% while costs fell; the table below lists each quarter.
<table><tr><td>Q1</td><td>1,020</td></tr><tr><td>Q2</td><td>1,110</td></tr></table>
$$E = mc^2 \\quad \\frac{a}{b} + \\sum_{i=1}^{n} x_i$$
<doctag><title><loc_12><loc_30><loc_480><loc_60>Introduction</title>
<text><loc_12><loc_70><loc_480><loc_200>Document parsing turns a page image into text.</text></doctag>
- item one, item two; figure 3 shows the layout of the page.
Page 17 of 240. Contact: office@example.org, +1 555 0100.
"""

PAD_TO = 64  # vocabularies padded to a multiple of this, as real checkpoints pad theirs


# HPD-Parsing's fork protocol: its only added tokens (categories are words, prompts are text). Added as
# plain (non-special) tokens: the text its vLLM build returns with vLLM's default skip_special_tokens
# shows <BLOCK> and <CHILD> (PaddleOCR's HPD-Parsing page); its tokenizer files were not readable here.
HPD_TOKENS = ("<BLOCK>", "<FORK>", "<CHILD>")


def format_tokens(model_type: str, own: str | None, fmt: str | None) -> tuple:
    """The tokens a replica adds for format `fmt`: none for its family's own (`own`, or None),
    treedec's control, category and prompt-mode tokens for `treedec`, HPD-Parsing's three for
    `hpd` (as `AddedToken`s that are not special); any other is one line."""
    from tokenizers import AddedToken

    from treedec.errors import UserError
    from treedec.formats.contract import CATEGORY_TOKENS, CONTROL
    from treedec.models.vlm import MODES

    if fmt in (None, own):
        return ()
    if fmt == "treedec":
        return (*CONTROL, *CATEGORY_TOKENS, *MODES.values())
    if fmt == "hpd":
        return tuple(AddedToken(t, special=False, normalized=False) for t in HPD_TOKENS)
    raise UserError(f"a {model_type} replica writes format {own or 'its own'}, treedec or hpd, not {fmt!r}")


def train_bpe(specials, vocab_size: int = 384, chat_template: str | None = None, split: str | None = None,
              **named: str):
    """A `PreTrainedTokenizerFast`: byte-level BPE of `vocab_size` trained on `CORPUS`, then
    `specials` added as special tokens (ids after the BPE's, in order; an `AddedToken` that is
    not special is added as a plain added token, after them); `split`: a regex the
    text is split on before the byte-level step (e.g. Qwen's pattern: single digits), else the
    byte-level's own; `named`: its bos/eos/pad/... tokens and any extra named token
    (e.g. `image_token="<image>"`)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = (pre_tokenizers.ByteLevel(add_prefix_space=False) if split is None else
                         pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([CORPUS] * 4, trainer)
    standard = {k: v for k, v in named.items() if k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    extra = {k: v for k, v in named.items() if k not in standard}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=chat_template, **standard,
                                   extra_special_tokens=extra or None)
    plain = [t for t in specials if isinstance(t, AddedToken) and t.special is False]
    fast.add_special_tokens({"additional_special_tokens": list(dict.fromkeys(t for t in specials if t not in plain))})
    fast.add_tokens(plain)
    return fast


def padded_vocab(tokenizer) -> int:
    return len(tokenizer) + (-len(tokenizer)) % PAD_TO


def random_model(model_cls, config, seed: int):
    """`model_cls(config)` with seeded random weights (fp32)."""
    import torch

    torch.manual_seed(seed)
    return model_cls(config).eval()


def save_checkpoint(out_dir: Path, model, processor, generation: dict[str, Any]) -> Path:
    """The folder a real checkpoint ships: the model (safetensors), the processor (tokenizer,
    chat template, image processor's config) and generation_config.json."""
    from transformers import GenerationConfig

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(**generation)
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir
