"""`treedec serve`'s HTTP face (FastAPI on uvicorn): the OpenAI chat-completions protocol the
parsers' clients speak, in front of one engine decoding every request in flight
(`treedec.serve.scheduler`).

    GET  /v1/models             the one model served (any model name is accepted)
    POST /v1/chat/completions   whole answers, or server-sent events with `stream: true`
    GET  /health                200 while the engine runs
    GET  /metrics               Prometheus text (`treedec.serve.metrics`)

With an API key set, `/v1/*` answers 401 without `Authorization: Bearer KEY`. Every refusal is an
OpenAI-style error body naming the field at fault (`treedec.serve.errors`), never a 500 for a
client's mistake; a request whose client disconnects is dropped from the engine at once."""
from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from treedec.data.sample import Sample
from treedec.engine.engine import Engine, EngineConfig
from treedec.engine.limits import PageLimits
from treedec.engine.page_options import PageOptions
from treedec.errors import UserError
from treedec.formats import Format
from treedec.serve.answers import answer, settled_text
from treedec.serve.errors import ApiError, bad
from treedec.serve.forced_pages import DataPages, region_page
from treedec.serve.images import MAX_PIXELS
from treedec.serve.metrics import Metrics
from treedec.serve.prompts import Asked, Prompts
from treedec.serve.protocol import ChatRequest, read_request
from treedec.serve.scheduler import Job, Scheduler
from treedec.serve.strategy import Served
from treedec.strategies.crop_read import crop_target
from treedec.training.packing import flat_graph

log = logging.getLogger("treedec.serve")
POLL_S = 0.25  # how often a handler waiting for a whole answer looks whether its client is still there


@dataclass
class ServeConfig:
    """`serve`'s own options (treedec/conf/serve.yaml: `serve.*`)."""
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    model_name: str | None = None  # the name /v1/models lists (null: the model's)
    queue_size: int = 256  # requests waiting behind the pages in flight; past it, 429
    max_image_pixels: int = MAX_PIXELS


@dataclass
class Server:
    """What a served request needs: the model, the strategy, its prompts, the engine's scheduler."""
    vlm: Any
    served: Served
    fmt: Format
    engine_cfg: EngineConfig
    cfg: ServeConfig
    name: str
    data: DataPages | None = None  # the forced decoder's data set
    metrics: Metrics = field(default_factory=Metrics)

    def __post_init__(self):
        self.strategy = self.served.strategy
        self.prompts = Prompts(self.vlm, self.fmt)
        self.context = context_length(self.vlm)
        self.scheduler = Scheduler(lambda: Engine(self.vlm.adapter(), self.strategy, self.engine_cfg),
                                   self.cfg.queue_size, self.metrics)
        self.preparer = ThreadPoolExecutor(1, thread_name_prefix="treedec-prepare")

    async def prepared(self, fn, *args):
        """`fn(*args)` (a request's image decoded, its prompt built) in the server's one preparing
        thread: requests are prepared one at a time beside the engine's thread, which then waits for
        the interpreter's lock behind one thread, not behind one per request in flight."""
        return await asyncio.get_running_loop().run_in_executor(self.preparer, fn, *args)

    # ------------------------------------------------------------------ one request
    async def job(self, req: ChatRequest, loop) -> tuple[Job, int]:
        """The request as a job for the engine (drafted, for HSD), and its token budget."""
        asked = await self.prepared(self.prompts.read, req, self.cfg.max_image_pixels)
        name = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        sample, target_of = await self.prepared(self._sample, name, asked)
        mode = self.strategy.mode if asked.page and self.strategy.fork_rule is not None else asked.mode
        try:
            prompt = await self.prepared(self.prompts.prompt, asked, mode)
        except UserError as e:
            raise bad("messages", str(e)) from None
        budget = self._budget(req, len(prompt.ids))
        limits = PageLimits(self.engine_cfg.max_pages, budget, self.engine_cfg.max_branches, None)
        target = target_of(prompt.ids) if target_of is not None else None
        options = PageOptions(limits=limits, sampling=None if self.vlm.forced else req.sampling(), target=target,
                              forks=asked.page)
        job = Job(name, prompt, sample, options, loop, asyncio.Queue(), priority=req.priority, stream=req.stream)
        if req.stream:
            job.settled = lambda g: settled_text(g, self.strategy, req.skip_special_tokens, budget)
        if self.served.drafter is not None:
            await self._draft(job, asked)
        return job, budget

    def _sample(self, name: str, asked: Asked):
        """The engine's sample for the request (its image; under forcing, the ground truth it is
        answered with) and, where the answer is no page of the strategy's, the target it is forced to."""
        if self.data is None:
            return Sample(name, None, asked.image), None
        where = "messages"
        if asked.mode == "crop":
            found, block = self.data.region(asked.image, where)
            page = region_page(found, block)
            return Sample(name, page, asked.image, category=block.category), \
                lambda ids: crop_target(page, self.vlm.tokenizer, ids, self.fmt)
        found = self.data.page(asked.image, where)
        sample = Sample(name, found.page, asked.image)
        if asked.mode == "layout":
            text = self.fmt.render_layout(found.page)
            return sample, lambda ids: flat_graph(ids, self.fmt.encode(self.vlm.tokenizer, text))
        return sample, None  # a page: the strategy's own target of it

    def _budget(self, req: ChatRequest, prompt_len: int) -> int:
        """The tokens the request may generate: what it asks for (`max_tokens`), at most the model's
        context less its prompt, which is also the default (as vLLM's)."""
        if prompt_len >= self.context:
            raise bad("messages", f"the prompt is {prompt_len} tokens, past the model's context of {self.context}")
        room, asked = self.context - prompt_len, req.max_new()
        if asked is None:
            return room
        if asked > room:
            field_name = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
            raise bad(field_name, f"{asked} is past this request's budget of {room} tokens (the model's context of "
                                  f"{self.context} less the prompt's {prompt_len})")
        return asked

    async def _draft(self, job: Job, asked: Asked) -> None:
        self.scheduler.room()  # a full queue refuses before drafting
        self.scheduler.drafting += 1
        self.metrics.waiting.set(self.scheduler.waiting)
        try:
            page, _ = await self.served.drafter.draft(job.id, asked.image)
        finally:
            self.scheduler.drafting -= 1
        drafted_in = self.strategy.mode if asked.page else asked.mode
        self.served.drafter.hand_over(job.id, self.vlm, asked.image, page, drafted_in, asked.category)

    def finish(self, job: Job, record, req: ChatRequest, budget: int) -> dict:
        """The whole answer of a decoded job, its figures counted."""
        ans = answer(record.graph, self.strategy, req.skip_special_tokens, budget)
        m = self.metrics
        m.requests.labels("200", ans.finish_reason).inc()
        m.prompt_tokens.inc(len(job.prompt.ids))
        m.generation_tokens.inc(ans.completion_tokens)
        m.page_steps.inc(record.steps)
        m.draft_tokens.inc(record.drafted)
        m.accepted_tokens.inc(record.accepted)
        m.latency.observe(time.perf_counter() - job.t_arrive)
        self.forget(job)
        return {"answer": ans, "usage": usage(len(job.prompt.ids), ans.completion_tokens)}

    def forget(self, job: Job) -> None:
        if self.served.drafter is not None:
            self.served.drafter.source.forget(job.id)


def usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def context_length(vlm) -> int:
    text = vlm.adapter().text_config
    return int(getattr(text, "max_position_embeddings", None) or 1 << 17)


# ---------------------------------------------------------------------- the app
def make_app(server: Server) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if server.served.drafter is not None:
            await run_in_threadpool(server.served.drafter.warm)
        server.scheduler.start()
        log.info("serving %s with strategy=%s on the embedded engine (%d pages in flight at most)", server.name,
                 server.strategy.name, server.engine_cfg.max_pages)
        yield
        await run_in_threadpool(server.scheduler.stop)
        server.preparer.shutdown(wait=False)
        if server.served.drafter is not None:
            server.served.drafter.close()

    app = FastAPI(title="treedec serve", lifespan=lifespan, docs_url=None, redoc_url=None)
    _errors(app, server)
    _routes(app, server)
    return app


def _errors(app: FastAPI, server: Server) -> None:
    """Every refusal an OpenAI-style error body (a client's mistake never a 500)."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        if e.status >= 400 and request.url.path.endswith("/chat/completions"):
            server.metrics.requests.labels(str(e.status), "").inc()
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException):
        return JSONResponse(ApiError(e.status_code, f"{request.method} {request.url.path}: {e.detail}").body(),
                            status_code=e.status_code)

    @app.exception_handler(UserError)
    async def user_error(request: Request, e: UserError):
        return JSONResponse(bad(None, str(e)).body(), status_code=400)


def _routes(app: FastAPI, server: Server) -> None:
    def authorised(request: Request) -> None:
        key = server.cfg.api_key
        if key and request.headers.get("authorization", "") != f"Bearer {key}":
            raise ApiError(401, "a valid API key is needed: Authorization: Bearer KEY")

    @app.get("/health")
    async def health():
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics():
        return Response(server.metrics.text(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models(request: Request):
        authorised(request)
        return {"object": "list", "data": [{"id": server.name, "object": "model", "created": int(time.time()),
                                             "owned_by": "treedec", "max_model_len": server.context}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        authorised(request)
        req = read_request(await request.body())
        loop = asyncio.get_running_loop()
        job, budget = await server.job(req, loop)
        server.scheduler.submit(job)
        if req.stream:
            return StreamingResponse(_events(server, job, req, budget), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        record = await _wait(server, job, request)
        done = server.finish(job, record, req, budget)
        ans = done["answer"]
        choice = {"index": 0, "message": {"role": "assistant", "content": ans.text}, "logprobs": None,
                  "finish_reason": ans.finish_reason}
        ids = {"prompt_token_ids": list(job.prompt.ids)} if req.return_token_ids else {}
        if req.return_token_ids:
            choice["token_ids"] = ans.ids
        return {"id": job.id, "object": "chat.completion", "created": int(time.time()), "model": req.model or server.name,
                "choices": [choice], "usage": done["usage"], **ids}


async def _wait(server: Server, job: Job, request: Request):
    """The job's decoding; its client leaving cancels it (its page dropped from the engine)."""
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(job.events.get(), POLL_S)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    server.scheduler.cancel(job)
                    server.forget(job)
                    raise ApiError(499, "the client closed the request")
                continue
            if kind == "done":
                return value
            if kind == "error":
                raise ApiError(500, value)
    except asyncio.CancelledError:
        server.scheduler.cancel(job)
        server.forget(job)
        raise


async def _events(server: Server, job: Job, req: ChatRequest, budget: int):
    """Server-sent events of a streaming answer: the role, the text as it settles, the finish
    reason, the usage where asked for, then `[DONE]`."""
    created, model = int(time.time()), req.model or server.name

    def chunk(delta: dict, finish: str | None = None, **extra) -> str:
        body = {"id": job.id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    finished = False
    try:
        yield chunk({"role": "assistant", "content": ""})
        first = True
        while True:
            kind, value = await job.events.get()
            if kind == "text":
                if first:
                    server.metrics.first_token.observe(time.perf_counter() - job.t_arrive)
                    first = False
                yield chunk({"content": value})
            elif kind == "error":
                yield f"data: {json.dumps(ApiError(500, value).body())}\n\n"
                break
            else:
                done = server.finish(job, value, req, budget)
                ans = done["answer"]
                rest = ans.text[len(job.sent):] if ans.text.startswith(job.sent) else ""
                if rest:
                    if first:
                        server.metrics.first_token.observe(time.perf_counter() - job.t_arrive)
                    yield chunk({"content": rest})
                yield chunk({}, ans.finish_reason)
                if req.stream_options is not None and req.stream_options.include_usage:
                    body = {"id": job.id, "object": "chat.completion.chunk", "created": created, "model": model,
                            "choices": [], "usage": done["usage"]}
                    yield f"data: {json.dumps(body)}\n\n"
                break
        finished = True
        yield "data: [DONE]\n\n"
    finally:
        if not finished:  # the client left mid-answer
            server.scheduler.cancel(job)
            server.forget(job)
