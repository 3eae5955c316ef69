"""Tiny Idefics3 configs built from a few numbers (no download).

Idefics3 = SigLIP-style ViT -> pixel-shuffle connector -> Llama. Facts this factory
relies on (transformers 5.19, checked in experiments/probes/NOTES.md):
- images must be square, exactly `image_size` px: the connector's pixel shuffle reshapes
  the patch sequence as sqrt(n) x sqrt(n); pad non-square pages to a square yourself
  (the HF processor with do_image_splitting=False *stretches* to a square instead);
- image tokens per image = (image_size // patch_size) ** 2 // scale_factor ** 2;
- the prompt around an image is `<fake_token_around_image><global-img>` + `<image>` * n +
  `<fake_token_around_image>` (what the HF/vLLM processor inserts when not splitting).
"""
from __future__ import annotations

from treedec.tokenizer import Tokenizer

IDEFICS3_SPECIAL = ("<fake_token_around_image>", "<global-img>", "<end_of_utterance>")


def tiny_tokenizer() -> Tokenizer:
    return Tokenizer(extra_special=IDEFICS3_SPECIAL)


def image_seq_len(image_size: int, patch_size: int, scale_factor: int) -> int:
    return (image_size // patch_size) ** 2 // scale_factor ** 2


def tiny_idefics3_config(tok: Tokenizer | None = None, *, image_size: int = 256, patch_size: int = 16,
                         scale_factor: int = 1, vision_hidden: int = 192, vision_layers: int = 2,
                         vision_heads: int = 3, text_hidden: int = 256, text_layers: int = 4,
                         head_dim: int = 64, kv_heads: int | None = None, intermediate: int | None = None,
                         max_positions: int = 4096, rope_theta: float = 10000.0,
                         attn_implementation: str = "sdpa"):
    from transformers import Idefics3Config

    tok = tok or tiny_tokenizer()
    if image_size % (patch_size * scale_factor):
        raise ValueError(f"image_size {image_size} must be a multiple of patch_size*scale_factor")
    heads = text_hidden // head_dim
    vocab = len(tok)
    vocab += (-vocab) % 64  # round up; unused ids are never produced by the tokenizer
    text = dict(model_type="llama", vocab_size=vocab, hidden_size=text_hidden,
                intermediate_size=intermediate or 4 * text_hidden, num_hidden_layers=text_layers,
                num_attention_heads=heads, num_key_value_heads=kv_heads or heads, head_dim=head_dim,
                max_position_embeddings=max_positions, rope_theta=rope_theta, rms_norm_eps=1e-5,
                pad_token_id=tok.pad_id, bos_token_id=tok.bos_id, eos_token_id=tok.eos_id,
                tie_word_embeddings=False)
    vision = dict(hidden_size=vision_hidden, intermediate_size=4 * vision_hidden,
                  num_hidden_layers=vision_layers, num_attention_heads=vision_heads,
                  image_size=image_size, patch_size=patch_size, num_channels=3)
    cfg = Idefics3Config(vision_config=vision, text_config=text, scale_factor=scale_factor,
                         image_token_id=tok.image_id, pad_token_id=tok.pad_id, tie_word_embeddings=False)
    cfg._attn_implementation = attn_implementation
    return cfg


def image_prompt_ids(tok: Tokenizer, n_image_tokens: int) -> list[int]:
    v = tok.vocab
    return ([v["<fake_token_around_image>"], v["<global-img>"]] + [tok.image_id] * n_image_tokens
            + [v["<fake_token_around_image>"]])
