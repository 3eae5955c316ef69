"""A checkpoint's `generation_config.json`: what treedec honours and what it refuses.

treedec decodes greedily (every strategy's acceptance is exact greedy: that is what makes
its speculation lossless). Honoured: `eos_token_id` (one id or a list: each ends a stream).
Refused in one line: settings that change which token greedy decoding picks
(`repetition_penalty` != 1, `no_repeat_ngram_size`, `bad_words_ids`, `suppress_tokens`,
`begin_suppress_tokens`, `forced_bos_token_id`, `forced_eos_token_id`, `min_new_tokens`,
`min_length`, `sequence_bias`, beams > 1). Sampling settings (`do_sample`, temperature,
top-k/p) are the checkpoint's default for sampling, which treedec never does: greedy is what
`python -m treedec check` compares with transformers' `generate(do_sample=False)`."""
from __future__ import annotations

import json
from pathlib import Path

from treedec.errors import UserError

NEUTRAL = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "bad_words_ids": None, "suppress_tokens": None,
           "begin_suppress_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
           "min_new_tokens": None, "min_length": 0, "sequence_bias": None, "num_beams": 1,
           "encoder_repetition_penalty": 1.0}


def generation_config(d: Path) -> dict:
    f = d / "generation_config.json"
    if not f.is_file():
        return {}
    try:
        return json.loads(f.read_text())
    except ValueError as e:
        raise UserError(f"{f} is not JSON: {e}") from None


def end_ids(d: Path) -> list[int]:
    """The checkpoint's end-of-sequence ids (generation_config.json's `eos_token_id`); a
    setting greedy decoding cannot honour losslessly is a one-line `UserError`."""
    cfg = generation_config(d)
    bad = [f"{k}={cfg[k]!r}" for k, neutral in NEUTRAL.items() if cfg.get(k, neutral) not in (neutral, [], {})]
    if bad:
        raise UserError(f"{d / 'generation_config.json'} sets {', '.join(bad)}, which treedec's greedy decoding "
                        "cannot honour losslessly: remove it (or set it to its neutral value) to decode this checkpoint")
    eos = cfg.get("eos_token_id")
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
