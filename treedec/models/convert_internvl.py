"""InternVL's remote-code layout (`internvl_chat`, loaded with `trust_remote_code`; HPD-Parsing
ships in it) to transformers' `internvl` layout, which treedec loads. The weights get the key
renames and the split of the ViT's fused qkv that transformers' own conversion script
(`transformers/models/internvl/convert_internvl_weights_to_hf.py`) applies. Unlike that script,
this reads the folder's files: it runs no remote code, downloads nothing, and is not limited to
the script's hard-coded list of hub names. `config.json`'s `llm_config` and `vision_config` become
`InternVLConfig`'s text and vision configs. The tokenizer is copied with its added tokens
(HPD-Parsing's `<BLOCK>`, `<FORK>`, `<CHILD>` are kept), and its image tokens are named as
transformers' processor reads them. The image processor is GotOcr2's, with the folder's tile
settings. The chat template is the folder's own where it writes the image as one
`<IMG_CONTEXT>`; otherwise it is the `-hf` one (`TEMPLATE`). Only a Qwen2/Qwen3 language model
is converted; its keys are the same in both layouts."""
from __future__ import annotations

import inspect
import json
import re
import shutil
from pathlib import Path

from treedec.errors import UserError
from treedec.formats.declare import declare_format

VISION_RENAMES = [(r"^vision_model\.", "vision_tower."), (r"\.layers\.", ".layer."), (r"class_embedding", "cls_token"),
                  (r"position_embedding", "position_embeddings"), (r"patch_embedding", "patch_embeddings.projection"),
                  (r"\.ls(\d+)", r".lambda_\1"), (r"attn\.proj", "attention.projection_layer"), (r"attn\.", "attention."),
                  (r"norm1", "layernorm_before"), (r"norm2", "layernorm_after")]
PROJECTOR = {"mlp1.0.": "multi_modal_projector.layer_norm.", "mlp1.1.": "multi_modal_projector.linear_1.",
             "mlp1.3.": "multi_modal_projector.linear_2."}
LANGUAGE_MODELS = ("qwen2", "qwen3")
IMAGE_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>"}
VISION_KEYS = {"qkv_bias": "attention_bias", "qk_normalization": "use_qk_norm", "attention_probs_dropout_prob":
               "attention_dropout"}
IMAGENET = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
# transformers' `-hf` chat template shape: an image as `<IMG_CONTEXT>\n` before the text (no system turn)
TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
            "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
            "{% for content in message['content'] %}{% if content['type'] == 'image' %}<IMG_CONTEXT>\n"
            "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
            "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def new_keys(tensors: dict) -> dict:
    """The `internvl` state dict of an `internvl_chat` one (the vision qkv split in three)."""
    out = {}
    for key, t in tensors.items():
        if key.startswith("language_model."):
            out[key] = t
        elif key.startswith("mlp1."):
            out[PROJECTOR[key[:7]] + key[7:]] = t
        elif key.startswith("vision_model."):
            new = key
            for pattern, repl in VISION_RENAMES:
                new = re.sub(pattern, repl, new)
            if ".attention.qkv." in new:
                for i, part in enumerate(("q_proj", "k_proj", "v_proj")):
                    out[new.replace("qkv", part)] = t.chunk(3, dim=0)[i].clone()
            else:
                out[new] = t
        else:
            raise UserError(f"unexpected weight {key!r} in an internvl_chat checkpoint (not vision_model., mlp1. or "
                            "language_model.)")
    return out


def internvl_config(src: dict, image_token_id: int):
    """transformers' `InternVLConfig` of an `internvl_chat` config.json."""
    from transformers import InternVLConfig, InternVLVisionConfig

    llm = dict(src["llm_config"])
    if llm.get("model_type") not in LANGUAGE_MODELS:
        raise UserError(f"the language model is {llm.get('model_type')!r}; only {', '.join(LANGUAGE_MODELS)} are "
                        "converted (InternLM2's keys need transformers' script)")
    llm = {k: v for k, v in llm.items() if k not in ("architectures", "auto_map", "_name_or_path")} | {"use_cache": True}
    known = set(inspect.signature(InternVLVisionConfig.__init__).parameters)
    vision = {VISION_KEYS.get(k, k): v for k, v in src["vision_config"].items()}
    vision = {k: v for k, v in vision.items() if k in known and k not in ("architectures", "transformers_version")}
    size = src.get("force_image_size") or src["vision_config"]["image_size"]
    patch = src["vision_config"]["patch_size"]
    vision |= {"image_size": [size, size], "patch_size": [patch, patch], "use_absolute_position_embeddings": True}
    ratio = src.get("downsample_ratio", 0.5)
    return InternVLConfig(text_config=llm, vision_config=vision, image_token_id=image_token_id,
                          image_seq_length=int((size // patch) ** 2 * ratio ** 2), downsample_ratio=ratio,
                          vision_feature_layer=src.get("select_layer", -1),
                          tie_word_embeddings=bool(llm.get("tie_word_embeddings", False)))


def read_weights(src: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(src.glob("*.safetensors"))
    if not files:
        raise UserError(f"no *.safetensors weights in {src} (a .bin checkpoint: save it as safetensors first)")
    return {k: v for f in files for k, v in load_file(str(f)).items()}


def convert_internvl_chat(src: str | Path, out: str | Path, fmt: str | None = None) -> dict:
    """Write `src` (an `internvl_chat` folder) as an `internvl` checkpoint in `out`, declaring
    format `fmt` when given (`hpd` for HPD-Parsing); what it did."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    src, out = Path(src), Path(out)
    cfg_path = src / "config.json"
    src_cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
    if src_cfg.get("model_type") != "internvl_chat":
        raise UserError(f"{cfg_path} is not an internvl_chat config (model_type {src_cfg.get('model_type')!r})")
    tok = AutoTokenizer.from_pretrained(src, extra_special_tokens=IMAGE_TOKENS)
    config = internvl_config(src_cfg, tok.convert_tokens_to_ids(IMAGE_TOKENS["context_image_token"]))
    out.mkdir(parents=True, exist_ok=True)
    save_file(new_keys(read_weights(src)), str(out / "model.safetensors"), metadata={"format": "pt"})
    config.architectures = ["InternVLForConditionalGeneration"]
    config.save_pretrained(out)
    own = own_template(tok)
    tok.chat_template = tok.chat_template if own else TEMPLATE
    tok.save_pretrained(out)
    image_processor(src_cfg).save_pretrained(out)
    for name in ("generation_config.json", "treedec_format.json", "treedec_prompts.json"):
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    if fmt:
        declare_format(out, fmt)
    return {"model_type": "internvl", "language_model": config.text_config.model_type,
            "chat_template": "the checkpoint's" if own else "transformers' -hf shape", "added_tokens": len(tok.get_added_vocab())}


def own_template(tok) -> bool:
    """Whether the tokenizer's own chat template writes an image as one `<IMG_CONTEXT>`."""
    if not tok.chat_template:
        return False
    msg = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}]
    try:
        text = tok.apply_chat_template(msg, tokenize=False, add_generation_prompt=True)
    except Exception:  # a remote-code template that cannot render content parts
        return False
    return text.count(IMAGE_TOKENS["context_image_token"]) == 1


def image_processor(src_cfg: dict):
    """GotOcr2's image processor (PIL) with the checkpoint's tile size and counts."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    size = src_cfg.get("force_image_size") or src_cfg["vision_config"]["image_size"]
    return GotOcr2ImageProcessorPil(size={"height": size, "width": size}, crop_to_patches=src_cfg.get("dynamic_image_size", True),
                                   min_patches=src_cfg.get("min_dynamic_patch", 1),
                                   max_patches=src_cfg.get("max_dynamic_patch", 12), **IMAGENET)
