"""A tiny `idefics3` checkpoint in the shape of granite-docling / SmolDocling: SigLIP-style
vision tower with pixel shuffle, a Llama (granite) text model, the page split into tiles
plus a global view (Idefics3's image splitting), granite's role tokens in the chat template
and the DocTags prompt "Convert this page to docling.". Random weights, real-style files."""
from __future__ import annotations

from pathlib import Path

from treedec.models.replicas.common import format_tokens, padded_vocab, random_model, save_checkpoint, train_bpe

FORMAT = "doctags"
PROMPT = "Convert this page to docling."
# granite-docling's chat template, in its shape: role markers, the image where the user's content has one
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- elif part['type'] == 'image' -%}{{- '<image>' -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|end_of_text|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}"
)
TILE = 64  # px per tile (max_image_size); the page is resized to <= 2x2 tiles plus the global view
PATCH = 16
SCALE = 2  # pixel shuffle: (TILE / PATCH)^2 / SCALE^2 = 4 image tokens per tile


def tokenizer(extra: tuple[str, ...] = ()):
    specials = ["<|start_of_role|>", "<|end_of_role|>", "<fake_token_around_image>", "<image>", "<global-img>",
                "<end_of_utterance>", *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7))]
    return train_bpe([*specials, *extra], chat_template=CHAT_TEMPLATE, bos_token="<|end_of_text|>",
                     eos_token="<|end_of_text|>", pad_token="<|pad|>", unk_token="<|unk|>")


def build(out_dir: Path, fmt: str | None = None, seed: int = 0) -> Path:
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tok = tokenizer(format_tokens("idefics3", FORMAT, fmt))
    text = dict(model_type="llama", vocab_size=padded_vocab(tok), hidden_size=64, intermediate_size=128,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                max_position_embeddings=2048, initializer_range=0.2, tie_word_embeddings=True,
                bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  image_size=TILE, patch_size=PATCH, initializer_range=0.2)
    cfg = Idefics3Config(text_config=text, vision_config=vision, scale_factor=SCALE,
                         image_token_id=tok.convert_tokens_to_ids("<image>"), tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id)
    images = Idefics3ImageProcessorPil(size={"longest_edge": 2 * TILE}, max_image_size={"longest_edge": TILE},
                                       do_image_splitting=True, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    proc = Idefics3Processor(images, tok, image_seq_len=(TILE // PATCH) ** 2 // SCALE ** 2,
                             chat_template=CHAT_TEMPLATE)
    model = random_model(Idefics3ForConditionalGeneration, cfg, seed)
    return save_checkpoint(out_dir, model, proc, dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                                      pad_token_id=tok.pad_token_id))
