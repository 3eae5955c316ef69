"""runtime=vllm against runtime=embedded: greedy, the same checkpoint, the same pages,
token id for token id (every stream's ids, sequential and padoc).

The checkpoint is tests/assets/vllm_tiny (remade by tests/assets/make_vllm_fixture.py): a
tiny VLM overfit on two synthetic pages, so that it forks and writes content. The vLLM
tests skip when vLLM is not installed (scripts/install_vllm.sh installs it); one engine
serves the whole module (an engine takes 20-90 s to start).
"""
import json
import subprocess
import sys

import pytest

from treedec.run.stages.recording import run_with_ids

from conftest import ROOT

FIXTURE = ROOT / "tests" / "assets" / "vllm_tiny"
MAX_NEW = 160


def _vllm_or_skip():
    try:
        import vllm  # noqa: F401
    except Exception as e:  # ImportError, or a CUDA-linked torchvision on CPU torch (see scripts/install_vllm.sh)
        pytest.skip(f"vLLM is not importable here ({type(e).__name__}); scripts/install_vllm.sh installs it")


def _samples(n=4):
    """Pages 1..n of the fixture's page generator (it was trained on 1 and 4)."""
    sys.path.insert(0, str(FIXTURE.parent))
    from make_vllm_fixture import PAGE

    from treedec.data.synth import generate_page

    return [generate_page(seed, PAGE) for seed in range(1, n + 1)]


def _vlm():
    from treedec.models.vlm import VLM

    return VLM.load(FIXTURE)


def assert_same_ids(got: dict, want: dict) -> None:
    """Every page, every stream, token id for token id."""
    assert sorted(got) == sorted(want)
    for name, streams in want.items():
        assert len(got[name]) == len(streams), name
        for g, w in zip(got[name], streams):
            assert g == w, (name, g[:3], next((i for i, (a, b) in enumerate(zip(g[3], w[3])) if a != b), None))


def test_serving_files_expand_one_image_into_our_prompt():
    """What vLLM's Idefics3 processor does with the checkpoint's files: one `<image>` becomes
    our image prompt, and the page becomes our pixels exactly."""
    from transformers import AutoProcessor

    vlm = _vlm()
    proc = AutoProcessor.from_pretrained(FIXTURE)
    from treedec.models.vlm import canvas

    for sample in _samples(2):
        for mode in ("flat", "tree"):
            ours = vlm.prompt(sample.image, mode)
            out = proc(text=[f"<image><|{mode}|>"], images=[[canvas(sample.image, vlm.spec.image_size)]],
                       return_tensors="pt")
            assert out["input_ids"][0].tolist() == ours.ids
            assert out["pixel_values"].shape == ours.inputs["pixel_values"].shape
            assert (out["pixel_values"] - ours.inputs["pixel_values"]).abs().max().item() == 0.0


@pytest.fixture(scope="module")
def both_runtimes(vllm_engines):
    """Each strategy's pages on both runtimes (one vLLM engine, the session's)."""
    _vllm_or_skip()
    from treedec.engine.engine import EngineConfig
    from treedec.runtimes.embedded import EmbeddedRuntime
    from treedec.runtimes.vllm.runtime import VLLMConfig, VLLMRuntime
    from treedec.strategies.base import STRATEGIES

    vlm, samples = _vlm(), _samples()
    out = {}
    for name in ("sequential", "padoc", "crops"):  # crops: its layout pass and its crops' reads, each a vLLM run
        strategy = STRATEGIES.get(name)(vlm.tokenizer)
        emb = run_with_ids(EmbeddedRuntime(EngineConfig(max_new_tokens=MAX_NEW, max_pages=4)), vlm, strategy, samples)
        vll = run_with_ids(VLLMRuntime(VLLMConfig(max_new_tokens=MAX_NEW, max_pages=4), FIXTURE, vllm_engines), vlm,
                           strategy, samples)
        out[name] = (emb, vll)
    return out


@pytest.mark.xdist_group("vllm")
@pytest.mark.parametrize("strategy", ["sequential", "padoc", "crops"])
def test_vllm_pages_equal_embedded_pages(both_runtimes, strategy):
    (emb, emb_ids), (vll, vll_ids) = both_runtimes[strategy]
    assert [r.name for r in emb.records] == [r.name for r in vll.records]
    assert_same_ids(vll_ids, emb_ids)  # every stream, token id for token id
    for e, v in zip(emb.records, vll.records):
        assert v.text == e.text, e.name
        assert v.generated == e.generated and v.streams == e.streams, e.name
        assert v.flags == e.flags, e.name
        # steps: scheduler iterations in which the page had a request running = the engine's critical path
        assert v.steps == e.steps, e.name
    if strategy in ("padoc", "crops"):
        trained = [r for r in vll.records if r.name in ("synth_0000001", "synth_0000004")]
        assert len(trained) == 2
        assert all(r.streams > 2 for r in trained), "the fixture should fork (crops: read regions) on its trained pages"
    if strategy == "padoc":
        assert sum(r.extra["cached_prompt_tokens"] for r in vll.records) > 0  # branches reuse the cached prefix
    elif strategy == "crops":
        assert any("#" in n for n in vll_ids)  # the crops' own run, recorded on both runtimes (compared above)
    else:
        assert all(r.streams == 1 for r in vll.records)


@pytest.mark.xdist_group("vllm")
def test_the_id_check_sees_one_changed_id(both_runtimes):
    """`assert_same_ids` on the runs above fails when one id of one stream differs."""
    (_, emb_ids), (_, vll_ids) = both_runtimes["padoc"]
    assert_same_ids(vll_ids, emb_ids)
    name = next(n for n, streams in vll_ids.items() if len(streams) > 2)
    changed = {n: [(*s[:3], list(s[3])) for s in streams] for n, streams in vll_ids.items()}
    ids = changed[name][-1][3]
    ids[len(ids) // 2] += 1
    with pytest.raises(AssertionError, match=name):
        assert_same_ids(changed, emb_ids)


@pytest.mark.xdist_group("vllm")
def test_run_command_with_runtime_vllm(tmp_path, both_runtimes):
    """`python -m treedec run runtime=vllm strategy=padoc compare=sequential` on the same
    page images writes the embedded engine's pages."""
    from treedec.io import page_to_markdown

    (emb, _), _ = both_runtimes["padoc"]
    images = tmp_path / "images"
    images.mkdir()
    for sample in _samples():
        sample.image.save(images / f"{sample.name}.png")
    r = subprocess.run([sys.executable, "-m", "treedec", "run", "runtime=vllm", "strategy=padoc", "compare=sequential",
                        f"model.path={FIXTURE}", "data=images", f"data.root={images}",
                        f"runtime.max_new_tokens={MAX_NEW}", "runtime.max_pages=4", f"out={tmp_path / 'out'}"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["pages"] == 4 and s["throughput_ratio"] is not None and s["steps_ratio"] > 1
    for rec in emb.records:
        fig = json.loads((tmp_path / "out" / "pages" / f"{rec.name}.json").read_text())
        assert (fig["steps"], fig["generated_tokens"], fig["streams"]) == (rec.steps, rec.generated, rec.streams), rec.name
        md = (tmp_path / "out" / "pages" / f"{rec.name}.md").read_text(encoding="utf-8")
        assert md == page_to_markdown(rec.page), rec.name
