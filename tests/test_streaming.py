"""Pages reach the engine lazily: a sample is read only when the engine has room, so memory
stays flat in the number of pages; the decoded pages are those of a list given at once."""
import torch

from treedec.data.synth import SynthConfig, generate_page
from treedec.engine.engine import EngineConfig
from treedec.models.vlm import VLM, VLMSpec
from treedec.runtimes.embedded import EmbeddedRuntime
from treedec.strategies.base import build_strategy

SPEC = VLMSpec(image_size=64, vision_hidden=32, vision_layers=1, vision_heads=1, text_hidden=64, text_layers=1,
               head_dim=32)


def test_samples_are_pulled_as_the_engine_has_room_and_results_do_not_change():
    torch.manual_seed(0)
    vlm = VLM.tiny(SPEC, seed=3)
    cfg = SynthConfig(width=64, height=64, cell=(8, 8), margin=1, regions=(1, 2), furniture_prob=0.0)
    pages = [generate_page(s, cfg) for s in range(9)]
    pages[4] = type(pages[4])(pages[4].name, pages[4].page, None)  # an unreadable page in the stream
    strategy = build_strategy({"name": "padoc"}, vlm.tokenizer)
    pulled, finished, ahead = [0], [0], []

    def stream():
        for s in pages:
            pulled[0] += 1
            ahead.append(pulled[0] - finished[0])
            yield s

    def done(rec):
        finished[0] += 1

    lazy = EmbeddedRuntime(EngineConfig(max_pages=2, max_new_tokens=10)).run(
        vlm, strategy, stream(), progress=False, warmup=False, on_record=done)
    whole = EmbeddedRuntime(EngineConfig(max_pages=16, max_new_tokens=10)).run(
        vlm, strategy, pages, progress=False, warmup=False)
    assert max(ahead) <= 2 + 1  # pages in flight + the one held ahead, never the whole stream
    assert finished[0] == len(pages) == len(lazy.records)
    assert [r.name for r in lazy.records] == [s.name for s in pages]  # input order, the unreadable page kept
    assert [r.text for r in lazy.records] == [r.text for r in whole.records]
    assert lazy.records[4].flags and all(r.steps > 0 for i, r in enumerate(lazy.records) if i != 4)
