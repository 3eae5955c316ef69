"""A tiny random InternVL (`internvl`, transformers' `-hf` layout; HPD-Parsing's
InternVL3.5-1B is one): a ViT on 32 x 32 tiles (patch 8, pixel shuffle 0.5: 4 tokens a
tile), the GotOcr2 image processor (the processor crops pages to tiles + a thumbnail), a
Qwen2 language model, the tokenizer's `<img>`, `</img>`, `<IMG_CONTEXT>` named as
InternVL's processor reads them, and a chat template in the shape of InternVL's (an image
as `<IMG_CONTEXT>\\n` before the text; `<|im_start|>role\\n...<|im_end|>\\n` turns)."""
from __future__ import annotations

import json
from pathlib import Path

from treedec.models.bpe_tokenizer import QWEN_PATTERN
from treedec.models.replicas.common import format_tokens, padded_vocab, random_model, train_bpe

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>")
NAMED = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
         "video_token": "<video>"}
TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
            "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
            "{% for content in message['content'] %}{% if content['type'] == 'image' %}<IMG_CONTEXT>\n"
            "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
            "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tokenizer(fmt: str | None):
    return train_bpe([*SPECIAL, *format_tokens("internvl", None, fmt)], split=QWEN_PATTERN,
                     chat_template=TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>", **NAMED)


def build(out_dir: Path, fmt: str | None, seed: int) -> Path:
    from transformers import InternVLConfig, InternVLForConditionalGeneration
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    hf = tokenizer(fmt)
    v = hf.get_vocab()
    pad, eos = v["<|endoftext|>"], v["<|im_end|>"]
    text = dict(model_type="qwen2", vocab_size=padded_vocab(hf), hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, pad_token_id=pad, bos_token_id=pad,
                eos_token_id=eos, initializer_range=0.2)
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  image_size=[32, 32], patch_size=[8, 8], initializer_range=0.2)
    cfg = InternVLConfig(vision_config=vision, text_config=text, image_token_id=v["<IMG_CONTEXT>"],
                         image_seq_length=4, downsample_ratio=0.5, tie_word_embeddings=False)
    random_model(InternVLForConditionalGeneration, cfg, seed).save_pretrained(out_dir)
    hf.save_pretrained(out_dir)
    GotOcr2ImageProcessorPil(size={"height": 32, "width": 32}, max_patches=6, image_mean=[0.5] * 3,
                             image_std=[0.5] * 3).save_pretrained(out_dir)
    (out_dir / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": pad, "eos_token_id": [eos], "pad_token_id": pad}, indent=1))
    return out_dir
