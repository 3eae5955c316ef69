"""The forced decoder as a server, and real clients end to end on real pages with no weights:
MinerU's own client (`MinerUClient(backend="http-client")`, `two_step_extract`) against
`serve model=forced model.format=mineru` with `strategy=sequential` and `strategy=hsd` gives the
same blocks, each ground-truth text region's text exactly (HSD's drafts accepted); a region's
crop asked 64 times at once is answered 200 every time; an image from no page of the data set is
a 400 saying so."""
import asyncio

import httpx
import pytest

from conftest import DEMO
from serve_helpers import data_url, metric, serving

pytest.importorskip("fastapi")
mineru = pytest.importorskip("mineru_vl_utils")
if not DEMO.is_dir():
    pytest.skip(f"no OmniDocBench demo pages at {DEMO}", allow_module_level=True)

FORCED = ["model=forced", "model.size=1m", "model.format=mineru", f"data.root={DEMO}", "runtime.max_pages=16"]
TEXT = "text"  # what MinerU's client reads a region's text as


@pytest.fixture(scope="module")
def pages():
    """The two demo pages with the fewest regions (the test's time), as the data set reads them."""
    from omegaconf import OmegaConf

    from treedec.data import open_dataset

    samples = list(open_dataset(OmegaConf.create({"name": "omnidocbench", "root": str(DEMO), "json": None,
                                                   "limit": None})))
    return sorted(samples, key=lambda s: len(s.page.blocks))[:2]


def extract(url: str, image):
    from loguru import logger

    from mineru_vl_utils import MinerUClient

    logger.disable("mineru_vl_utils")
    client = MinerUClient(backend="http-client", server_url=url, use_tqdm=False)
    return client.two_step_extract(image)


def text_regions(page):
    """The ground truth's regions MinerU reads as text: every region with content but tables
    (read as OTSL, which the client turns into HTML of its own shape) and those no crop reads."""
    from treedec.strategies.crop_read import UNREAD

    return [b for b in page.reading_order() if b.content and b.category != "table" and b.category not in UNREAD]


def test_mineru_two_step_extract_gives_the_ground_truth_through_sequential_and_hsd(pages):
    with serving([*FORCED, "strategy=sequential"]) as (url, _):
        plain = [extract(url, s.image) for s in pages[:1]]
    with serving([*FORCED, "strategy=hsd"]) as (url, _):
        drafted = [extract(url, s.image) for s in pages[:1]]
        accepted = metric(httpx.get(f"{url}/metrics").text, "treedec_spec_decode_num_accepted_tokens_total")
    assert accepted > 0
    for s, a, b in zip(pages[:1], plain, drafted):
        assert [(x.type, x.bbox, x.content) for x in a] == [(x.type, x.bbox, x.content) for x in b], s.name
        texts = {x.content for x in a}
        wanted = text_regions(s.page)
        assert wanted and all(r.content in texts for r in wanted), [r.content for r in wanted if r.content not in texts]


def test_64_requests_for_a_regions_crop_at_once_are_all_answered(pages):
    from treedec.formats import get_format
    from treedec.serve.forced_pages import cut, region_boxes

    s = pages[0]
    block, (box, *_) = next((b, boxes) for b, boxes in region_boxes(s.page, get_format("mineru")) if b.content)
    crop = cut(s, box)
    crop = crop.resize((crop.width * 3 // 2, crop.height * 3 // 2))  # as a client resizes it
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(crop)}}, {"type": "text", "text": "\nText Recognition:"}]}],
        "top_k": 1, "presence_penalty": 1.0, "frequency_penalty": 0.05, "vllm_xargs": {"no_repeat_ngram_size": 100}}

    async def burst(url):
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            return await asyncio.gather(*[http.post("/v1/chat/completions", json=body) for _ in range(64)])

    with serving([*FORCED, "strategy=sequential"]) as (url, _):
        answers = asyncio.run(burst(url))
        assert [r.status_code for r in answers] == [200] * 64
        assert {r.json()["choices"][0]["message"]["content"] for r in answers} == {block.content}
        from PIL import Image

        noise = Image.effect_noise((200, 40), 80).convert("RGB")
        r = httpx.post(f"{url}/v1/chat/completions", json={**body, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_url(noise)}}, {"type": "text", "text": "\nText Recognition:"}]}]})
        assert r.status_code == 400 and "matches no region" in r.json()["error"]["message"]


def test_padoc_answers_the_spliced_page_sequential_answers_in_fewer_steps(pages):
    """A page request to `padoc` (treedec's format, forced): the page in flat form, the branches
    spliced, equal to `sequential`'s answer id for id, on a shorter critical path."""
    from treedec.serve.answers import answer  # noqa: F401  (the answer's form: tests/test_serve.py)

    forced = ["model=forced", "model.size=1m", f"data.root={DEMO}", "runtime.max_pages=4"]
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(pages[1].image)}}, {"type": "text", "text": "<|flat|>"}]}],
        "return_token_ids": True, "skip_special_tokens": False}
    got = {}
    for strategy in ("sequential", "padoc"):
        with serving([*forced, f"strategy={strategy}"]) as (url, _):
            got[strategy] = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300).json()
            got[strategy]["steps"] = metric(httpx.get(f"{url}/metrics").text, "treedec_request_steps_total")
    seq, padoc = got["sequential"], got["padoc"]
    assert padoc["choices"][0]["token_ids"] == seq["choices"][0]["token_ids"]
    assert padoc["choices"][0]["message"]["content"].startswith("<BLOCK>") and padoc["steps"] < seq["steps"]


def test_doclings_api_vlm_pipeline_converts_a_page(pages, tmp_path):
    """docling's VLM pipeline with an API model (docling-slim: no model of its own), asking for
    DocTags, converts a demo page through the forced server in `doctags`: the page's text back."""
    docling = pytest.importorskip("docling")  # noqa: F841
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import VlmPipelineOptions
    from docling.datamodel.pipeline_options_vlm_model import ApiVlmOptions, ResponseFormat
    from docling.document_converter import DocumentConverter, ImageFormatOption
    from docling.pipeline.vlm_pipeline import VlmPipeline

    s = pages[0]
    path = tmp_path / f"{s.name}.png"
    s.image.save(path)
    with serving(["model=forced", "model.size=1m", "model.format=doctags", f"data.root={DEMO}"]) as (url, _):
        options = VlmPipelineOptions(enable_remote_services=True, vlm_options=ApiVlmOptions(
            url=f"{url}/v1/chat/completions", params={"model": "granite-docling", "max_tokens": 8000},
            prompt="Convert this page to docling.", response_format=ResponseFormat.DOCTAGS, timeout=300, scale=0.5))
        converter = DocumentConverter(format_options={
            InputFormat.IMAGE: ImageFormatOption(pipeline_cls=VlmPipeline, pipeline_options=options)})
        result = converter.convert(path)
    markdown = result.document.export_to_markdown()
    words = [w for b in text_regions(s.page) for w in b.content.split() if len(w) > 3]
    assert str(result.status).endswith("SUCCESS") and words and all(w in markdown for w in words), markdown[:500]
