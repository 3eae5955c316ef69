"""`treedec serve` through real clients: the `openai` client (whole, streamed, /models,
extra_body), answers equal to the engine's own decode of the same prompt, the requests a server
must refuse (each a 4xx JSON error naming the field) and what it must survive (a full queue, a
client that leaves, a wrong key)."""
import asyncio
import json
import struct
import zlib

import httpx
import pytest

from serve_helpers import data_url, messages, metric, serving

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def pages():
    """Two pages of the shipped tiny model's own kind."""
    from omegaconf import OmegaConf

    from treedec.data import open_dataset
    from treedec.models.loader import load_vlm

    vlm = load_vlm(OmegaConf.create({"name": "tiny", "path": None}))
    return list(open_dataset(OmegaConf.create({"name": "synth", "pages": 2, "seed": 7}), model_pages=vlm.pages))


@pytest.fixture(scope="module")
def tiny_server():
    with serving(["runtime.max_pages=4"]) as (url, server):
        yield url, server


def engine_text(server, image, mode: str = "flat") -> str:
    """The answer the engine gives the same prompt in a batch of its own (greedy), special tokens kept."""
    from treedec.data.sample import Sample
    from treedec.engine.engine import Engine
    from treedec.serve.answers import answer

    vlm, strategy = server.vlm, server.strategy
    [rec] = Engine(vlm.adapter(), strategy, server.engine_cfg).run([("p", vlm.prompt(image, mode), Sample("p", None, image))])
    return answer(rec.graph, strategy, skip_special=False).text


def test_openai_client_whole_and_streamed_answers_equal_the_engines(tiny_server, pages):
    url, server = tiny_server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    [model] = client.models.list().data
    image = pages[0].image
    whole = client.chat.completions.create(model="any-name", messages=messages(image, "<|flat|>"), max_tokens=400,
                                           temperature=0, extra_body={"skip_special_tokens": False})
    want = engine_text(server, image)
    assert whole.choices[0].message.content == want and whole.choices[0].finish_reason == "stop"
    assert whole.usage.prompt_tokens == len(server.vlm.prompt(image, "flat").ids)
    assert whole.usage.completion_tokens == len(server.vlm.tokenizer.encode(want)) + 1  # + the stop token
    assert "<eos>" not in want and want.startswith("<BLOCK>")
    stream = client.chat.completions.create(model=model.id, messages=messages(image, "<|flat|>", system="Be exact."),
                                            max_tokens=400, stream=True, stream_options={"include_usage": True},
                                            extra_body={"skip_special_tokens": False})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == want and sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3  # streamed as it settled
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    plain = client.chat.completions.create(model="x", messages=messages(image, "<|flat|>"), max_tokens=400)
    assert plain.choices[0].message.content == server.vlm.tokenizer.hf.decode(
        server.vlm.tokenizer.encode(want), skip_special_tokens=True)  # skip_special_tokens: true by default
    cut = client.chat.completions.create(model="x", messages=messages(image, "<|flat|>"), max_tokens=5,
                                         extra_body={"skip_special_tokens": False})
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 5


def tiny_png(width: int, height: int) -> str:
    """A PNG that says it is `width` x `height` (its header alone: nothing to decode)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(b"\0" * 7)) + chunk(b"IEND", b"")
    import base64
    return "data:image/png;base64," + base64.b64encode(png).decode()


def test_malformed_requests_get_4xx_json_naming_the_field_and_the_server_serves_on(tiny_server, pages):
    url, server = tiny_server
    image = data_url(pages[0].image)

    def user(*parts):
        return {"messages": [{"role": "user", "content": list(parts)}]}

    img, text = {"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": "<|flat|>"}
    battery = [
        (b"{not json", 400, None),
        (json.dumps({"model": "x"}), 400, "messages"),
        (json.dumps({"messages": []}), 400, "messages"),
        (json.dumps(user({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}, text)), 400,
         "messages.0.content.0.image_url"),
        (json.dumps(user({"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}, text)), 400,
         "messages.0.content.0.image_url"),
        (json.dumps(user({"type": "image_url", "image_url": {"url": "https://example.com/p.png"}}, text)), 400,
         "messages.0.content.0.image_url"),
        (json.dumps(user({"type": "image_url", "image_url": {"url": tiny_png(20000, 20000)}}, text)), 413,
         "messages.0.content.0.image_url"),
        (json.dumps(user({"type": "audio", "audio": {}}, text)), 400, "messages.0.content.0.audio"),
        (json.dumps(user({"type": "video_url"}, text)), 400, "messages.0.content.0.type"),
        (json.dumps(user(text)), 400, "messages"),  # no image
        (json.dumps(user(img, img, text)), 400, "messages.0.content.1.image_url"),
        (json.dumps(user(img, {"type": "text", "text": "tell me a story"})), 400, "messages"),  # no prompt of this model
        (json.dumps({**user(img, text), "max_tokens": -3}), 400, "max_tokens"),
        (json.dumps({**user(img, text), "max_tokens": 10 ** 6}), 400, "max_tokens"),
        (json.dumps({**user(img, text), "n": 2}), 400, "n"),
        (json.dumps({**user(img, text), "stop": ["\n"]}), 400, "stop"),
        (json.dumps({**user(img, text), "logprobs": True}), 400, "logprobs"),
        (json.dumps({**user(img, text), "temperature": -1}), 400, "temperature"),
        (json.dumps({**user(img, text), "frobnicate": 1}), 400, "frobnicate"),
        (json.dumps({**user(img, text), "vllm_xargs": {"beam": 2}}), 400, "vllm_xargs.beam"),
        (json.dumps({"messages": [{"role": "robot", "content": "hi"}]}), 400, "messages.0.role"),
    ]
    with httpx.Client(base_url=url, timeout=60) as http:
        for body, status, param in battery:
            r = http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
            assert r.status_code == status, (body[:100], r.status_code, r.text)
            err = r.json()["error"]
            assert err["param"] == param and err["message"] and err["code"] == status, (body[:100], err)
            if param:
                assert err["message"].startswith(param), err
        long = json.dumps({**user(img, text), "max_tokens": 3})
        assert http.post("/v1/chat/completions", content=long).status_code == 200  # still serving
        assert http.get("/v1/nowhere").json()["error"]["code"] == 404
        assert metric(http.get("/metrics").text, "treedec_num_requests_running") == 0


def test_a_wrong_or_missing_key_gets_401(pages):
    with serving(["api_key=sesame"]) as (url, _):
        body = {"model": "m", "messages": messages(pages[0].image, "<|flat|>"), "max_tokens": 2}
        assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 401
        assert httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.get(f"{url}/health").status_code == 200
        ok = openai.OpenAI(base_url=f"{url}/v1", api_key="sesame").chat.completions.create(**body)
        assert ok.choices[0].finish_reason == "length"


def test_past_the_queue_a_429_with_retry_after_and_a_client_that_leaves_frees_its_page(pages):
    with serving(["runtime.max_pages=1", "queue_size=1"]) as (url, server):
        body = {"model": "m", "messages": messages(pages[0].image, "<|flat|>"), "max_tokens": 200, "stream": True}

        async def burst():
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                return await asyncio.gather(*[http.post("/v1/chat/completions", json=body) for _ in range(4)])

        codes = sorted(r.status_code for r in asyncio.run(burst()))
        assert codes.count(200) >= 2 and 429 in codes, codes
        refused = next(r for r in asyncio.run(burst()) if r.status_code == 429)
        assert refused.headers["retry-after"] == "1" and refused.json()["error"]["type"] == "rate_limit_error"
        with httpx.Client(base_url=url, timeout=120) as http:
            with http.stream("POST", "/v1/chat/completions", json={**body, "max_tokens": 4000}) as r:
                next(r.iter_lines())  # the first event: then the client leaves
            t = __import__("time").time()
            while server.scheduler.engine.active and __import__("time").time() - t < 30:
                __import__("time").sleep(0.05)
            assert not server.scheduler.engine.active  # its page left the engine, its KV freed
            assert metric(http.get("/metrics").text, "treedec_num_requests_running") == 0
            assert http.post("/v1/chat/completions", json={**body, "stream": False, "max_tokens": 3}).status_code == 200


def test_penalties_are_honoured_and_hsd_verifies_its_drafts_against_them(pages):
    """MinerU's sampling fields (and a repetition penalty and a short no-repeat n-gram, so that they
    change the answer): `hsd`'s answer equals `sequential`'s id for id, drafts accepted."""
    image = pages[1].image
    penalised = {"presence_penalty": 1.0, "frequency_penalty": 0.05, "repetition_penalty": 1.3, "top_k": 1,
                 "top_p": 0.01, "vllm_xargs": {"no_repeat_ngram_size": 3, "debug": False}, "priority": 0}
    body = {"model": "m", "messages": messages(image, "<|flat|>"), "max_tokens": 300, "return_token_ids": True,
            "skip_special_tokens": False}
    answers = {}
    for strategy in ("sequential", "hsd"):
        with serving([f"strategy={strategy}", "runtime.max_pages=2"]) as (url, _):
            with httpx.Client(base_url=url, timeout=300) as http:
                answers[strategy] = http.post("/v1/chat/completions", json={**body, **penalised}).json()
                if strategy == "sequential":
                    answers["plain"] = http.post("/v1/chat/completions", json=body).json()
                else:
                    accepted = metric(http.get("/metrics").text, "treedec_spec_decode_num_accepted_tokens_total")
    ids = {k: a["choices"][0]["token_ids"] for k, a in answers.items()}
    assert ids["hsd"] == ids["sequential"] != ids["plain"] and accepted > 0


def test_sampling_draws_from_the_tempered_distribution_reproducibly_by_seed(tiny_server, pages):
    """temperature > 0 samples (the same seed, the same answer); top_k 1, or a nucleus of one
    token (MinerU's top_p 0.01), is greedy whatever the temperature."""
    url, _ = tiny_server
    body = {"model": "m", "messages": messages(pages[0].image, "<|flat|>"), "max_tokens": 100, "temperature": 2.0,
            "return_token_ids": True}

    def ids(http, **fields):
        return http.post("/v1/chat/completions", json={**body, **fields}).json()["choices"][0]["token_ids"]

    with httpx.Client(base_url=url, timeout=120) as http:
        a, b, c = ids(http, seed=1), ids(http, seed=1), ids(http, seed=2)
        greedy = ids(http, temperature=0)
        assert ids(http, seed=1, top_k=1) == greedy == ids(http, seed=3, top_p=0.01) == ids(http, seed=4, min_p=1.0)
    assert a == b and a != c and greedy not in (a, c)


def test_sigterm_answers_what_is_in_flight_then_exits(pages, tmp_path):
    import signal
    import socket
    import subprocess
    import sys
    import threading
    import time

    from conftest import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "treedec", "serve", f"port={port}", f"out={tmp_path / 'serve'}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        t = time.time()
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None and time.time() - t < 120, proc.stdout.read()
                time.sleep(0.2)
        answer = {}
        body = {"model": "m", "messages": messages(pages[0].image, "<|flat|>"), "max_tokens": 400}
        request = threading.Thread(target=lambda: answer.update(r=httpx.post(f"{url}/v1/chat/completions", json=body,
                                                                              timeout=300)))
        request.start()
        while metric(httpx.get(f"{url}/metrics").text, "treedec_num_requests_running") < 1:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        request.join(300)
        assert answer["r"].status_code == 200 and answer["r"].json()["choices"][0]["finish_reason"] == "stop"
        assert proc.wait(60) == 0
        assert "Traceback" not in proc.stdout.read()
    finally:
        proc.kill()


def test_64_clients_with_pages_of_mixed_sizes_each_get_their_own_answer(pages):
    """64 requests at once over four pages of four sizes, 16 in flight: every answer the one the
    engine gives that page alone (its first 24 tokens); none lost; the engine empty after, the
    process's peak memory no larger after a second burst."""
    import resource

    from treedec.data.sample import Sample
    from treedec.engine.engine import Engine

    images = [pages[0].image, pages[1].image.resize((180, 240)), pages[0].image.resize((300, 200)),
              pages[1].image.crop((0, 0, 256, 128))]
    body = lambda k: {"model": "m", "messages": messages(images[k % 4], "<|flat|>"), "max_tokens": 24,
                      "return_token_ids": True}

    async def burst(url):
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            return await asyncio.gather(*[http.post("/v1/chat/completions", json=body(k)) for k in range(64)])

    with serving(["runtime.max_pages=16"]) as (url, server):
        vlm, strategy = server.vlm, server.strategy
        engine = Engine(vlm.adapter(), strategy, server.engine_cfg)
        want = [rec.graph[0].tokens[rec.graph[0].prompt_len:][:24] for rec in sorted(
            engine.run([(str(k), vlm.prompt(im, "flat"), Sample(str(k), None, im)) for k, im in enumerate(images)]),
            key=lambda r: int(r.name))]
        for round in range(2):
            answers = asyncio.run(burst(url))
            assert [r.status_code for r in answers] == [200] * 64
            assert [r.json()["choices"][0]["token_ids"] for r in answers] == [want[k % 4] for k in range(64)]
            assert not server.scheduler.engine.active and not server.scheduler.in_flight
            assert server.scheduler.engine.arena.used == 0
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            first = rss if round == 0 else first
    assert rss < first * 1.2  # the second burst found its memory (peak RSS, kB) already there
