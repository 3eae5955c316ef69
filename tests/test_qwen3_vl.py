"""Qwen3-VL checkpoints on the embedded engine, on a tiny random Qwen3-VL saved to disk the
way a real checkpoint folder is (config, weights, tokenizer with a chat template, image
processor config) and loaded by `load_vlm`: one stream equals HF greedy generation, a
tree equals each branch decoded alone, pages with different images (so different mrope
deltas) decode the same together as alone, and missing tokens or unknown model types are
one-line user errors."""
import json

import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from treedec.engine.engine import Engine, EngineConfig
from treedec.errors import UserError
from treedec.models.adapter import Prompt
from treedec.models.loader import load_vlm
from treedec.strategies.base import STRATEGIES
from treedec.tokenizer import PAD, UNK

from engine_helpers import TOK, ForcedTree

# Qwen's chat and vision tokens plus two of treedec's prompt modes, appended to treedec's
# own vocabulary so that every id of `TOK` (used by ForcedTree) keeps its value.
QWEN_TOKENS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
MODE_TOKENS = ("<|flat|>", "<|tree|>")
CHAT_TEMPLATE = (  # the shape of Qwen3-VL's template for one user turn of image + text
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def char_tokenizer(treedec_tokens: bool, modes=MODE_TOKENS):
    """A transformers tokenizer: treedec's (control tokens included) or a bare character
    vocabulary, plus Qwen's tokens and `modes` (two mode tokens), with a chat template."""
    from tokenizers import AddedToken, Regex, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import PreTrainedTokenizerFast

    from treedec.tokenizer import Tokenizer

    if treedec_tokens:
        base = Tokenizer().hf
    else:
        base = HFTokenizer(models.WordLevel({t: i for i, t in enumerate([PAD, UNK, *"abcdefghij0123456789<>|"])},
                                            unk_token=UNK))
        base.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    base.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in (*QWEN_TOKENS, *modes)])
    hf = PreTrainedTokenizerFast(tokenizer_object=base, eos_token="<|im_end|>", pad_token=PAD, unk_token=UNK)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def save_tiny_qwen3_vl(directory, treedec_tokens: bool = True, seed: int = 0, modes=MODE_TOKENS):
    """A random Qwen3-VL (2 text layers of width 64, 2 ViT layers both feeding DeepStack)
    saved as a checkpoint folder; `modes`: the prompt mode tokens its tokenizer has."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    hf = char_tokenizer(treedec_tokens, modes)
    v = hf.get_vocab()
    text = dict(vocab_size=len(hf) + (-len(hf)) % 64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=2048,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [6, 5, 5],
                                 "mrope_interleaved": True},
                pad_token_id=v[PAD], initializer_range=0.2)
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16, spatial_merge_size=2,
                  temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=64,
                  deepstack_visual_indexes=[0, 1], initializer_range=0.2)
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, image_token_id=v["<|image_pad|>"],
                        video_token_id=v["<|video_pad|>"], vision_start_token_id=v["<|vision_start|>"],
                        vision_end_token_id=v["<|vision_end|>"], tie_word_embeddings=False)
    torch.manual_seed(seed)
    Qwen3VLForConditionalGeneration(cfg).save_pretrained(directory)
    hf.save_pretrained(directory)
    images = Qwen2VLImageProcessorPil(size={"shortest_edge": 32 * 32, "longest_edge": 128 * 128}, patch_size=16,
                                      merge_size=2, temporal_patch_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    images.save_pretrained(directory)
    return directory


def model_cfg(path):
    return OmegaConf.create({"name": "tiny", "path": str(path)})


def page(seed: int, width: int, height: int) -> Image.Image:
    g = torch.Generator().manual_seed(seed)
    return Image.fromarray((torch.rand(height, width, 3, generator=g) * 255).byte().numpy())


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    torch.set_num_threads(1)
    return load_vlm(model_cfg(save_tiny_qwen3_vl(tmp_path_factory.mktemp("qwen3_vl"))))


def hf_greedy(vlm, prompt: Prompt, ctx: list[int], max_new: int, processor=None) -> list[int]:
    """HF's own generate (its own mrope positions and deltas) from `ctx` with the page's image."""
    dev, tok = vlm.model.device, vlm.tokenizer
    ids = torch.tensor([ctx], device=dev)
    out = vlm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             pixel_values=prompt.inputs["pixel_values"].to(dev),
                             image_grid_thw=prompt.inputs["image_grid_thw"].to(dev),
                             mm_token_type_ids=(ids == tok.image_id).int(), max_new_tokens=max_new, do_sample=False,
                             logits_processor=[processor] if processor else None,
                             eos_token_id=tok.eos_id, pad_token_id=tok.pad_id)
    return out[0, len(ctx):].tolist()


def run(vlm, strategy: str, prompts, processors=(), **cfg):
    eng = Engine(vlm.adapter(), STRATEGIES.get(strategy)(vlm.tokenizer), EngineConfig(**cfg), processors)
    res = {r.name: r for r in eng.run([(f"p{i}", p, None) for i, p in enumerate(prompts)])}
    return eng, [res[f"p{i}"] for i in range(len(prompts))]


def test_loads_with_the_checkpoint_tokens_and_mrope_prompt(vlm):
    from treedec.models.qwen3_vl import Qwen3VL

    assert isinstance(vlm, Qwen3VL)
    tok = vlm.tokenizer
    assert all(tok.vocab[t] == TOK.vocab[t] for t in ("<BLOCK>", "<FORK>", "<CHILD>", "<eos>", "a", "7"))
    assert tok.decode(tok.encode("<BLOCK><|text_block|>[1,2,3,4]<CHILD>ab c<eos>")) == \
        "<BLOCK><|text_block|>[1,2,3,4]<CHILD>ab c<eos>"
    p = vlm.prompt(page(0, 96, 64), "tree")
    assert p.inputs["image_grid_thw"].tolist() == [[1, 4, 6]]
    assert p.ids.count(tok.image_id) == 4 * 6 // 4
    assert tok.decode(p.ids).startswith("<|im_start|>user\n<|vision_start|><|image_pad|>")
    assert tok.decode(p.ids).endswith("<|vision_end|><|tree|><|im_end|>\n<|im_start|>assistant\n")
    # the image (2 x 3 merged cells) advances positions by 3, not by its 6 tokens
    assert p.position_offset == 3 - 6
    assert p.inputs["position_ids"][1:, 0, -1].tolist() == [len(p.ids) - 1 + p.position_offset] * 3


def test_one_stream_equals_hf_greedy(vlm):
    p = vlm.prompt(page(1, 96, 64), "flat")
    _, [r] = run(vlm, "sequential", [p], max_new_tokens=30)
    ours = r.graph[0].tokens[len(p.ids):]
    assert ours == hf_greedy(vlm, p, p.ids, 30)
    assert r.steps == len(ours)


def test_tree_equals_per_branch_decoding(vlm):
    p = vlm.prompt(page(2, 64, 128), "tree")
    lengths = [5, 2, 7]
    proc = ForcedTree(len(p.ids), 3, lengths)
    _, [r] = run(vlm, "padoc", [p], processors=[proc])
    g = r.graph
    assert len(g) == 4 and all(not s.live for s in g.streams)
    assert g[0].tokens[len(p.ids):] == hf_greedy(vlm, p, p.ids, 100, proc)
    for k, c in enumerate(g.children(0)):
        s = g[c]
        ctx = g.context(c)[: -len(s.tokens)] + s.tokens[:1]  # prompt + layout before its <FORK> + <CHILD>
        assert s.tokens[1:] == hf_greedy(vlm, p, ctx, 100, proc), f"branch {k}"
        assert len(s.tokens) == 1 + lengths[k] + 1
    assert r.steps == g.critical_path() < g.total_generated()


def test_pages_with_different_deltas_decode_the_same_together(vlm):
    prompts = [vlm.prompt(page(3, 96, 64), "tree"), vlm.prompt(page(4, 64, 128), "tree")]
    assert prompts[0].position_offset != prompts[1].position_offset
    procs = [ForcedTree(len(p.ids), 2 + i, [3 + i, 4, 2]) for i, p in enumerate(prompts)]

    class PerPrompt:  # each page's context to its own forced plan (the prompt identifies the page)
        def __call__(self, ids, scores):
            for p, proc in zip(prompts, procs):
                if ids[0, : len(p.ids)].tolist() == p.ids:
                    return proc(ids, scores)
            raise AssertionError("unknown page")

    alone = [run(vlm, "padoc", [p], processors=[PerPrompt()])[1][0] for p in prompts]
    eng, together = run(vlm, "padoc", prompts, processors=[PerPrompt()], compact_min=16, compact_ratio=0.2)
    for p, proc, a, b in zip(prompts, procs, alone, together):
        assert [s.tokens for s in a.graph.streams] == [s.tokens for s in b.graph.streams]
        assert b.graph[0].tokens[len(p.ids):] == hf_greedy(vlm, p, p.ids, 100, proc)
    assert eng.arena.used == 0


def test_missing_tokens_are_a_user_error(vlm, tmp_path):
    with pytest.raises(UserError, match=r"lacks the prompt token <\|crop\|>"):
        vlm.prompt(page(5, 64, 64), "crop")
    with pytest.raises(UserError, match="has no token '<nope>'"):
        vlm.tokenizer.vocab["<nope>"]  # e.g. a strategy's token (padoc_rows' <tr>) the checkpoint lacks
    bare = save_tiny_qwen3_vl(tmp_path / "bare", treedec_tokens=False)
    with pytest.raises(UserError, match=r"lacks treedec's tokens <BLOCK> <FORK> <CHILD> <eos> <\|title\|> <\|text_bl"):
        load_vlm(OmegaConf.create({"name": "tiny", "path": str(bare), "format": "treedec"}))
    plain = load_vlm(model_cfg(bare))  # without treedec's format: its own end, no fork (a strategy that forks says so)
    assert not plain.tokenizer.treedec_tokens and plain.tokenizer.eos_ids == (plain.tokenizer.hf.eos_token_id,)
    with pytest.raises(UserError, match="has no treedec tokens"):
        plain.tokenizer.fork_id


def test_unknown_model_type_is_a_user_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(UserError, match=r"unsupported model_type 'llama'.*supported: qwen2_vl, qwen2_5_vl, qwen3_vl, internvl, paddleocr_vl, idefics3"):
        load_vlm(model_cfg(tmp_path))


def test_training_a_qwen3_vl_checkpoint_is_a_one_line_error(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    path = save_tiny_qwen3_vl(tmp_path / "q")
    r = subprocess.run([sys.executable, "-m", "treedec", "train", f"model.path={path}", "train.steps=1",
                        f"out={tmp_path / 'out'}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "train continues treedec's own tiny VLM only" in r.stderr
