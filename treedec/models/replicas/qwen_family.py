"""What the Qwen2-VL, Qwen2.5-VL and Qwen3-VL replicas share: the tokenizer (the replicas'
byte-level BPE split as Qwen's, with its special tokens), a chat template in the shape of Qwen's (one
`<|im_start|>role\\n...<|im_end|>\\n` per turn, an image as
`<|vision_start|><|image_pad|><|vision_end|>`; Qwen2/2.5-VL add the default system turn),
the PIL image processor, a generation_config as the instruct checkpoints ship it, and
the text config's common sizes. Each family's module sets its vision tower."""
from __future__ import annotations

import json
from pathlib import Path

from treedec.models.bpe_tokenizer import QWEN_PATTERN
from treedec.models.replicas.common import format_tokens, padded_vocab, random_model, train_bpe

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
           "<|image_pad|>", "<|video_pad|>")
SYSTEM = "You are a helpful assistant."


def chat_template(default_system: bool) -> str:
    """A Jinja chat template in the shape of Qwen's (the family's own, with or without its default system turn)."""
    system = ("{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n" + SYSTEM + "<|im_end|>\n"
              "{% endif %}") if default_system else ""
    return ("{% for message in messages %}" + system + "<|im_start|>{{ message['role'] }}\n"
            "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
            "{% for content in message['content'] %}{% if content['type'] == 'image' %}"
            "<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'text' %}{{ content['text'] }}"
            "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tokenizer(model_type: str, fmt: str | None, default_system: bool):
    return train_bpe([*SPECIAL, *format_tokens(model_type, None, fmt)], split=QWEN_PATTERN,
                     chat_template=chat_template(default_system), eos_token="<|im_end|>", pad_token="<|endoftext|>")


def ids(hf) -> dict:
    """The config's token ids and the vocabulary (padded, as real checkpoints pad it)."""
    v = hf.get_vocab()
    return dict(vocab=padded_vocab(hf), image=v["<|image_pad|>"], video=v["<|video_pad|>"],
                start=v["<|vision_start|>"], end=v["<|vision_end|>"], pad=v["<|endoftext|>"], eos=v["<|im_end|>"])


def text_config(t: dict, mrope_section: list[int], **extra) -> dict:
    """Two decoder layers of width 64 (head 32), M-RoPE over `mrope_section` (sums to 16)."""
    return dict(vocab_size=t["vocab"], hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope_section, **extra},
                pad_token_id=t["pad"], bos_token_id=t["pad"], eos_token_id=t["eos"], initializer_range=0.2)


def save(out: Path, model_cls, config, hf, patch: int, seed: int) -> Path:
    """Random weights (`seed`), the tokenizer, the PIL image processor (patch `patch`, merge 2,
    pages of at most 128 x 128 px) and generation_config.json into `out`."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    random_model(model_cls, config, seed).save_pretrained(out)
    hf.save_pretrained(out)
    cell = patch * 2
    Qwen2VLImageProcessorPil(size={"shortest_edge": cell * cell, "longest_edge": 128 * 128}, patch_size=patch,
                             merge_size=2, temporal_patch_size=2).save_pretrained(out)
    t = ids(hf)
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": t["pad"], "eos_token_id": [t["eos"], t["pad"]], "pad_token_id": t["pad"], "do_sample": True,
         "top_k": 1, "top_p": 0.001, "temperature": 0.01}, indent=1))
    return out
