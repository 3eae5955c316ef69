"""`python -m treedec convert`: an `internvl_chat` checkpoint (InternVL's remote-code layout,
HPD-Parsing's) as transformers' `internvl`. The source is written here by hand in InternVL's
own key names (`vision_model.*` with a fused `attn.qkv`, `mlp1.0/1/3`, `language_model.*` a
Qwen2ForCausalLM's) with HPD-Parsing's tokens, random values. The source's own logits cannot be
computed here (its model is remote code), so the check is key for key. transformers'
`InternVLForConditionalGeneration` loads the result with no key missing or unexpected.
Every source tensor lands, equal, at its new name (the qkv's three parts at q/k/v). treedec
then loads it as format hpd with HPD's tokens kept."""
import json
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file, save_file

from treedec.errors import UserError
from treedec.models.bpe_tokenizer import QWEN_PATTERN
from treedec.models.convert_internvl import convert_internvl_chat
from treedec.models.loader import load_vlm
from treedec.models.replicas.common import HPD_TOKENS, format_tokens, padded_vocab, train_bpe

from conftest import ROOT

D, I, P, S, LAYERS, H = 32, 64, 8, 32, 2, 64  # ViT width, MLP, patch, tile; LM width


def vision_tensors(g) -> dict:
    """InternViT's and the projector's tensors in InternVL's own names (its remote code), random."""
    e = "vision_model.embeddings."
    t = {e + "class_embedding": (1, 1, D), e + "patch_embedding.weight": (D, 3, P, P), e + "patch_embedding.bias": (D,),
         e + "position_embedding": (1, (S // P) ** 2 + 1, D),
         "mlp1.0.weight": (4 * D,), "mlp1.0.bias": (4 * D,), "mlp1.1.weight": (H, 4 * D), "mlp1.1.bias": (H,),
         "mlp1.3.weight": (H, H), "mlp1.3.bias": (H,)}
    for i in range(LAYERS):
        p = f"vision_model.encoder.layers.{i}."
        t |= {p + "attn.qkv.weight": (3 * D, D), p + "attn.qkv.bias": (3 * D,), p + "attn.proj.weight": (D, D),
              p + "attn.proj.bias": (D,), p + "ls1": (D,), p + "ls2": (D,), p + "norm1.weight": (D,),
              p + "norm1.bias": (D,), p + "norm2.weight": (D,), p + "norm2.bias": (D,), p + "mlp.fc1.weight": (I, D),
              p + "mlp.fc1.bias": (I,),
              p + "mlp.fc2.weight": (D, I), p + "mlp.fc2.bias": (D,)}
    return {k: torch.randn(shape, generator=g) for k, shape in t.items()}


@pytest.fixture(scope="module")
def chat_checkpoint(tmp_path_factory):
    """A tiny internvl_chat folder: config.json in InternVL's shape, weights in its key names,
    a Qwen-style BPE tokenizer with InternVL's image tokens and HPD-Parsing's (no chat template)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    d = tmp_path_factory.mktemp("internvl_chat")
    tok = train_bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>",
                     *format_tokens("internvl", None, "hpd")], split=QWEN_PATTERN, eos_token="<|im_end|>",
                    pad_token="<|endoftext|>")
    tok.save_pretrained(d)
    llm = dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], vocab_size=padded_vocab(tok), hidden_size=H,
               intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
               eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), tie_word_embeddings=False)
    lm = Qwen2ForCausalLM(Qwen2Config(**{k: v for k, v in llm.items() if k != "architectures"}))
    g = torch.Generator().manual_seed(1)
    tensors = vision_tensors(g) | {"language_model." + k: torch.randn(v.shape, generator=g)  # every value its own
                                   for k, v in lm.state_dict().items()}
    save_file(tensors, str(d / "model.safetensors"))
    vision = dict(model_type="intern_vit_6b", hidden_size=D, intermediate_size=I, num_hidden_layers=LAYERS,
                  num_attention_heads=2, image_size=S, patch_size=P, qkv_bias=True, qk_normalization=False,
                  norm_type="layer_norm", layer_norm_eps=1e-6, hidden_act="gelu", use_flash_attn=False,
                  drop_path_rate=0.0, initializer_factor=1.0, attention_probs_dropout_prob=0.0, num_channels=3)
    (d / "config.json").write_text(json.dumps(dict(
        model_type="internvl_chat", architectures=["InternVLChatModel"], llm_config=llm, vision_config=vision,
        downsample_ratio=0.5, force_image_size=S, select_layer=-1, template="internvl2_5", ps_version="v2",
        dynamic_image_size=True, use_thumbnail=True, min_dynamic_patch=1, max_dynamic_patch=6)))
    return d, tensors


@pytest.fixture(scope="module")
def converted(chat_checkpoint, tmp_path_factory):
    src, _ = chat_checkpoint
    out = tmp_path_factory.mktemp("internvl")
    done = convert_internvl_chat(src, out, "hpd")
    assert done["chat_template"] == "transformers' -hf shape" and done["language_model"] == "qwen2"
    return out


def test_transformers_loads_the_result_with_no_key_missing_or_unexpected(converted):
    from transformers import InternVLForConditionalGeneration

    _, info = InternVLForConditionalGeneration.from_pretrained(converted, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info


def test_every_source_tensor_lands_equal_at_its_new_name(chat_checkpoint, converted):
    _, src = chat_checkpoint
    out = load_file(str(converted / "model.safetensors"))
    assert len(out) == len(src) + 2 * 2 * LAYERS  # each qkv weight and bias: three tensors for one
    v = "vision_tower.encoder.layer.1."
    qkv = src["vision_model.encoder.layers.1.attn.qkv.weight"]
    for i, part in enumerate(("q_proj", "k_proj", "v_proj")):
        assert torch.equal(out[v + f"attention.{part}.weight"], qkv[i * D:(i + 1) * D]), part
    e, o, w = "vision_model.embeddings.", "vision_tower.embeddings.", "vision_model.encoder.layers.1."
    same = {e + "class_embedding": o + "cls_token", e + "position_embedding": o + "position_embeddings",
            e + "patch_embedding.weight": o + "patch_embeddings.projection.weight", w + "ls2": v + "lambda_2",
            w + "norm1.bias": v + "layernorm_before.bias",
            w + "attn.proj.weight": v + "attention.projection_layer.weight",
            w + "mlp.fc2.weight": v + "mlp.fc2.weight", "mlp1.0.weight": "multi_modal_projector.layer_norm.weight",
            "mlp1.3.bias": "multi_modal_projector.linear_2.bias",
            "language_model.lm_head.weight": "language_model.lm_head.weight"}
    for old, new in same.items():
        assert torch.equal(out[new], src[old]), (old, new)
    rest = [t for k, t in src.items() if "qkv" not in k]  # every other tensor, found once among the outputs
    assert all(sum(1 for u in out.values() if u.shape == t.shape and torch.equal(u, t)) == 1 for t in rest)


def test_treedec_loads_it_as_hpd_with_hpds_tokens(converted):
    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": str(converted)}))
    tok = vlm.tokenizer
    assert all(tok.is_token(t) for t in HPD_TOKENS) and not tok.treedec_tokens and tok.fork_id == tok.vocab["<FORK>"]
    assert vlm.prompt_text("tree").endswith(
        "<IMG_CONTEXT>\ndocument parsing with fork.<|im_end|>\n<|im_start|>assistant\n")
    assert vlm.model.config.image_token_id == tok.image_id == tok.vocab["<IMG_CONTEXT>"]


def test_what_it_cannot_convert_is_one_line(chat_checkpoint, tmp_path):
    src, _ = chat_checkpoint
    cfg = json.loads((src / "config.json").read_text())
    bad = tmp_path / "internlm2"
    bad.mkdir()
    for f in src.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    llm = {**cfg["llm_config"], "model_type": "internlm2"}
    (bad / "config.json").write_text(json.dumps({**cfg, "llm_config": llm}))
    with pytest.raises(UserError, match="only qwen2, qwen3 are converted"):
        convert_internvl_chat(bad, tmp_path / "o")
    with pytest.raises(UserError, match=r"unsupported model_type 'internvl_chat'.*python -m treedec convert src=DIR"):
        load_vlm(OmegaConf.create({"name": "tiny", "path": str(src)}))  # unconverted: loading says how
    r = subprocess.run([sys.executable, "-m", "treedec", "convert", f"src={tmp_path / 'none'}",
                        f"out={tmp_path / 'o2'}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode != 0 and "is not a checkpoint folder" in r.stderr and "Traceback" not in r.stderr
