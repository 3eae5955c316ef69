"""A tiny `hunyuan_vl` checkpoint in HunyuanOCR's shape: a ViT at the page's own resolution
(patches merged 2x2, a newline token closing each row, begin/end tokens around the image),
a HunYuan dense text model with 4-axis xD-RoPE (position, width, height, image index; the
"xdrope" scaling as dynamic NTK with alpha), HunYuan's `<｜hy_...｜>` role tokens in the chat
template and a Markdown parsing prompt. Random weights, real-style files."""
from __future__ import annotations

from pathlib import Path

from treedec.models.replicas.common import format_tokens, padded_vocab, random_model, save_checkpoint, train_bpe

FORMAT = "markdown"
PROMPT = "Parse the document in the image into Markdown."
BOS, EOS = "<｜hy_begin▁of▁sentence｜>", "<｜hy_place▁holder▁no▁2｜>"
USER, ASSISTANT, SYSTEM_END = "<｜hy_User｜>", "<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"
IM_START, IM_END, IMAGE, IM_NEWLINE = (f"<｜hy_place▁holder▁no▁{n}｜>" for n in (100, 101, 102, 103))
PAD = "<｜hy_▁pad▁｜>"
# HunyuanOCR's chat template, in its shape: sentence start, an optional system turn closed by
# its marker, user turns with the image wrapped in its begin/end tokens, the assistant marker
CHAT_TEMPLATE = (
    "{{- '" + BOS + "' -}}"
    "{%- for message in messages -%}"
    "{%- set text = message['content'] if message['content'] is string else "
    "message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') -%}"
    "{%- if message['role'] == 'system' -%}{{- text + '" + SYSTEM_END + "' -}}"
    "{%- elif message['role'] == 'user' -%}{{- '" + USER + "' -}}"
    "{%- if message['content'] is not string -%}"
    "{%- for part in message['content'] if part['type'] == 'image' -%}"
    "{{- '" + IM_START + IMAGE + IM_END + "' -}}{%- endfor -%}{%- endif -%}{{- text -}}"
    "{%- else -%}{{- '" + ASSISTANT + "' + text + '" + EOS + "' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '" + ASSISTANT + "' -}}{%- endif -%}"
)
PATCH, MERGE = 16, 2


def tokenizer(extra: tuple[str, ...] = ()):
    return train_bpe([USER, ASSISTANT, SYSTEM_END, IM_START, IM_END, IMAGE, IM_NEWLINE, *extra],
                     chat_template=CHAT_TEMPLATE, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                     image_token=IMAGE, image_start_token=IM_START, image_end_token=IM_END)


def build(out_dir: Path, fmt: str | None = None, seed: int = 0) -> Path:
    from transformers import HunYuanVLConfig, HunYuanVLForConditionalGeneration, HunYuanVLProcessor
    from transformers.models.hunyuan_vl.image_processing_pil_hunyuan_vl import HunYuanVLImageProcessorPil

    tok = tokenizer(format_tokens("hunyuan_vl", FORMAT, fmt))
    ids = tok.convert_tokens_to_ids
    text = dict(vocab_size=padded_vocab(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=4096,
                initializer_range=0.2, rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0,
                                                        "factor": 1.0, "mrope_section": [4, 4, 4, 4]},
                bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                eod_token_id=tok.eos_token_id, sep_token_id=tok.pad_token_id)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  patch_size=PATCH, spatial_merge_size=MERGE, out_hidden_size=64, max_image_size=128,
                  min_image_size=32, initializer_range=0.2)
    cfg = HunYuanVLConfig(text_config=text, vision_config=vision, image_token_id=ids(IMAGE), im_start_id=ids(IM_START),
                          im_end_id=ids(IM_END), im_newline_id=ids(IM_NEWLINE), tie_word_embeddings=True)
    factor = PATCH * MERGE
    images = HunYuanVLImageProcessorPil(min_pixels=2 * factor * factor, max_pixels=16 * factor * factor,
                                        patch_size=PATCH, merge_size=MERGE)
    proc = HunYuanVLProcessor(images, tok, chat_template=CHAT_TEMPLATE)
    model = random_model(HunYuanVLForConditionalGeneration, cfg, seed)
    return save_checkpoint(out_dir, model, proc, dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                                      pad_token_id=tok.pad_token_id))
