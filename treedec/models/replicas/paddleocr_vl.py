"""A tiny `paddleocr_vl` checkpoint in PaddleOCR-VL's shape: a NaViT-style vision tower at the
page's own resolution (patches merged 2x2), an ERNIE-4.5-style text model with 3-axis
M-RoPE, ERNIE's sentence tokens in the chat template ("User: <image>OCR:\\nAssistant: ")
and the task prompt "OCR:". Random weights, real-style files."""
from __future__ import annotations

from pathlib import Path

from treedec.models.replicas.common import format_tokens, padded_vocab, random_model, save_checkpoint, train_bpe

FORMAT = "paddleocr"
PROMPT = "OCR:"
IMAGE = "<|IMAGE_PLACEHOLDER|>"
# PaddleOCR-VL's chat template, in its shape: the sentence-start token, "User: " with the
# images first and the task text after, "Assistant: " as the generation prompt
CHAT_TEMPLATE = (
    "{{- '<|begin_of_sentence|>' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{- 'User: ' -}}"
    "{%- for part in message['content'] if part['type'] == 'image' -%}"
    "{{- '<|IMAGE_START|>" + IMAGE + "<|IMAGE_END|>' -}}{%- endfor -%}"
    "{%- for part in message['content'] if part['type'] == 'text' -%}{{- part['text'] -}}{%- endfor -%}"
    "{{- '\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}{{- 'Assistant: ' + message['content'][0]['text'] -}}"
    "{{- '<|end_of_sentence|>' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'Assistant: ' -}}{%- endif -%}"
)
PATCH, MERGE = 14, 2


def tokenizer(extra: tuple[str, ...] = ()):
    specials = ["<|begin_of_sentence|>", "<|end_of_sentence|>", "<|IMAGE_START|>", IMAGE, "<|IMAGE_END|>",
                "<|video_pad|>"]
    return train_bpe([*specials, *extra], chat_template=CHAT_TEMPLATE, bos_token="<s>", eos_token="</s>", pad_token="<unk>",
                     image_token=IMAGE)


def build(out_dir: Path, fmt: str | None = None, seed: int = 0) -> Path:
    from transformers import PaddleOCRVLConfig, PaddleOCRVLForConditionalGeneration, PaddleOCRVLProcessor
    from transformers.models.paddleocr_vl.image_processing_pil_paddleocr_vl import PaddleOCRVLImageProcessorPil

    tok = tokenizer(format_tokens("paddleocr_vl", FORMAT, fmt))
    ids = tok.convert_tokens_to_ids
    text = dict(vocab_size=padded_vocab(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=4096,
                initializer_range=0.2, rope_parameters={"rope_type": "default", "rope_theta": 500000.0,
                                                        "mrope_section": [4, 6, 6]},
                bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  image_size=4 * PATCH, patch_size=PATCH, spatial_merge_size=MERGE, initializer_range=0.2)
    cfg = PaddleOCRVLConfig(text_config=text, vision_config=vision, image_token_id=ids(IMAGE),
                            video_token_id=ids("<|video_pad|>"), vision_start_token_id=ids("<|IMAGE_START|>"),
                            vision_end_token_id=ids("<|IMAGE_END|>"), tie_word_embeddings=True)
    factor = PATCH * MERGE
    images = PaddleOCRVLImageProcessorPil(min_pixels=2 * factor * factor, max_pixels=16 * factor * factor,
                                          patch_size=PATCH, merge_size=MERGE, temporal_patch_size=1,
                                          image_mean=[0.5] * 3, image_std=[0.5] * 3)
    proc = PaddleOCRVLProcessor(images, tok, chat_template=CHAT_TEMPLATE)
    model = random_model(PaddleOCRVLForConditionalGeneration, cfg, seed)
    return save_checkpoint(out_dir, model, proc, dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                                      pad_token_id=tok.pad_token_id))
