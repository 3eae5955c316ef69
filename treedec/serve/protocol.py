"""The chat-completions request as the parsers' clients send it (OpenAI's fields and vLLM's
extras), read strictly: every field is declared, each either honoured or refused with a 400
that names it; an unknown field is refused too (never silently ignored).

Honoured: `messages` (system, user and assistant turns; text and `image_url` parts, the image a
data URL), `max_tokens` / `max_completion_tokens`, `stream` (+ `stream_options.include_usage`),
the sampling fields `temperature`, `top_p`, `top_k`, `min_p`, `seed`, `repetition_penalty`,
`presence_penalty`, `frequency_penalty` and `vllm_xargs.no_repeat_ngram_size`
(`treedec.engine.sampling`; an unset temperature is greedy, where vLLM would take the
checkpoint's generation_config or 1.0: a parser's answer should be reproducible), `skip_special_tokens`, `priority` (lower first, as vLLM's priority
scheduling), `return_token_ids` (vLLM's: the answer's and the prompt's ids beside the text). Accepted
and without effect on the answer: `model` (any name: one model is served),
`user`, `metadata`, `store`, `vllm_xargs.debug`, `n` = 1, `stream_options.continuous_usage_stats`
false. Refused unless left at their default: `n` > 1, `stop`, `stop_token_ids`, `logprobs`,
`top_logprobs`, `logit_bias`, `response_format` other than text, `tools`, `tool_choice`,
`echo`, `min_tokens`, `ignore_eos` and the chat-template overrides."""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from treedec.engine.sampling import Sampling
from treedec.serve.errors import ApiError, bad


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageURL(_Strict):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class Part(_Strict):
    type: str
    text: str | None = None
    image_url: ImageURL | str | None = None


class Message(_Strict):
    role: Literal["system", "user", "assistant", "developer"]
    content: str | list[Part] | None = None
    name: str | None = None


class StreamOptions(_Strict):
    include_usage: bool = False
    continuous_usage_stats: Literal[False] = False


class VllmXargs(_Strict):
    no_repeat_ngram_size: int | None = Field(default=None, ge=0)
    debug: bool = False


REFUSED = {  # field -> the value that means "not used" (anything else: a 400 naming it)
    "stop": (None, [], ""), "stop_token_ids": (None, []), "logprobs": (None, False), "top_logprobs": (None, 0),
    "logit_bias": (None, {}), "tools": (None, []), "tool_choice": (None, "none"), "functions": (None, []),
    "function_call": (None, "none"), "echo": (None, False), "min_tokens": (None, 0), "ignore_eos": (None, False),
    "chat_template": (None,), "chat_template_kwargs": (None, {}), "add_generation_prompt": (None, True),
    "continue_final_message": (None, False), "mm_processor_kwargs": (None, {}), "guided_json": (None,),
    "guided_regex": (None,), "guided_choice": (None,), "structured_outputs": (None,), "prompt_logprobs": (None,),
    "parallel_tool_calls": (None, True, False), "best_of": (None, 1), "use_beam_search": (None, False),
    "length_penalty": (None, 1.0), "truncate_prompt_tokens": (None,), "bad_words": (None, []),
    "allowed_token_ids": (None,), "include_stop_str_in_output": (None, False), "logits_processors": (None,),
    "spaces_between_special_tokens": (None, True), "return_tokens_as_token_ids": (None, False),
    "modalities": (None, ["text"]), "audio": (None,), "prediction": (None,), "reasoning_effort": (None,),
    "web_search_options": (None,), "kv_transfer_params": (None,),
}


class ChatRequest(_Strict):
    messages: list[Message] = Field(min_length=1)
    model: str | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0, le=1)
    seed: int | None = None
    repetition_penalty: float | None = Field(default=None, gt=0)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    vllm_xargs: VllmXargs | None = None
    skip_special_tokens: bool = True
    return_token_ids: bool = False  # vLLM's: the answer's ids (`choices[].token_ids`) and the prompt's
    priority: int = 0
    n: Literal[1] | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    service_tier: str | None = None
    # refused unless at their default (REFUSED)
    stop: Any = None
    stop_token_ids: Any = None
    logprobs: Any = None
    top_logprobs: Any = None
    logit_bias: Any = None
    response_format: Any = None
    tools: Any = None
    tool_choice: Any = None
    functions: Any = None
    function_call: Any = None
    echo: Any = None
    min_tokens: Any = None
    ignore_eos: Any = None
    chat_template: Any = None
    chat_template_kwargs: Any = None
    add_generation_prompt: Any = None
    continue_final_message: Any = None
    mm_processor_kwargs: Any = None
    guided_json: Any = None
    guided_regex: Any = None
    guided_choice: Any = None
    structured_outputs: Any = None
    prompt_logprobs: Any = None
    parallel_tool_calls: Any = None
    best_of: Any = None
    use_beam_search: Any = None
    length_penalty: Any = None
    truncate_prompt_tokens: Any = None
    bad_words: Any = None
    allowed_token_ids: Any = None
    include_stop_str_in_output: Any = None
    logits_processors: Any = None
    spaces_between_special_tokens: Any = None
    return_tokens_as_token_ids: Any = None
    modalities: Any = None
    audio: Any = None
    prediction: Any = None
    reasoning_effort: Any = None
    web_search_options: Any = None
    kv_transfer_params: Any = None

    def sampling(self) -> Sampling:
        xargs = self.vllm_xargs or VllmXargs()
        return Sampling(temperature=self.temperature or 0.0,  # unset: greedy (a parser's answer, reproducible)
                        top_p=1.0 if self.top_p is None else self.top_p, top_k=self.top_k or 0,
                        min_p=self.min_p or 0.0, repetition_penalty=self.repetition_penalty or 1.0,
                        presence_penalty=self.presence_penalty or 0.0, frequency_penalty=self.frequency_penalty or 0.0,
                        no_repeat_ngram_size=xargs.no_repeat_ngram_size or 0, seed=self.seed)

    def max_new(self) -> int | None:
        """The tokens asked for at most (`max_completion_tokens`, else `max_tokens`; None: the server's)."""
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


def read_request(body: bytes) -> ChatRequest:
    """The request in `body`, or an `ApiError` (400) naming the field at fault."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad(None, f"the body is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise bad(None, "the body must be a JSON object")
    try:
        req = ChatRequest.model_validate(data)
    except ValidationError as e:
        where, err = max(((_where(err["loc"]), err) for err in e.errors()), key=lambda w: len(w[0]))  # the deepest
        what = "unknown field (not part of the chat-completions request)" if err["type"] == "extra_forbidden" \
            else err["msg"]
        raise bad(".".join(where) or None, what) from None
    _refuse_unused(req)
    for name in ("max_tokens", "max_completion_tokens"):
        value = getattr(req, name)
        if value is not None and value < 1:
            raise bad(name, f"must be at least 1, got {value}")
    rf = req.response_format
    if rf not in (None, {"type": "text"}):
        raise bad("response_format", "only {\"type\": \"text\"} is served (no structured output)")
    return req


def _where(loc: tuple) -> list[str]:
    """A validation error's place in the request: its location without pydantic's union tags
    (`str`, `list[Part]`, `ImageURL`: which member of a union was tried)."""
    return [str(x) for x in loc if not (isinstance(x, str) and (x in _TAGS or "[" in x or x[:1].isupper()))]


_TAGS = {"str", "int", "float", "bool", "dict", "list", "none", "literal"}


def _refuse_unused(req: ChatRequest) -> None:
    for name, unused in REFUSED.items():
        value = getattr(req, name)
        if not any(value == u and type(value) is type(u) for u in unused if u is not None) and value is not None:
            raise bad(name, f"is not supported by treedec serve (got {json.dumps(value)[:80]}); leave it out")


def content_parts(req: ChatRequest) -> list[tuple[str, int, list[tuple[str, str, str]]]]:
    """Each message as (role, index, parts), a part ("text", text, where) or ("image", url, where);
    an unknown part type or a part without its field is a 400 naming it."""
    out = []
    for i, m in enumerate(req.messages):
        parts: list[tuple[str, str, str]] = []
        content = m.content
        if content is None:
            content = []
        if isinstance(content, str):
            parts.append(("text", content, f"messages.{i}.content"))
        else:
            for j, p in enumerate(content):
                where = f"messages.{i}.content.{j}"
                if p.type == "text":
                    if p.text is None:
                        raise bad(f"{where}.text", "a text part needs its text")
                    parts.append(("text", p.text, where))
                elif p.type == "image_url":
                    if p.image_url is None:
                        raise bad(f"{where}.image_url", "an image_url part needs its image_url")
                    url = p.image_url if isinstance(p.image_url, str) else p.image_url.url
                    parts.append(("image", url, f"{where}.image_url"))
                else:
                    raise bad(f"{where}.type", f"unknown content part {p.type!r}: text and image_url are served")
        if m.role != "user" and any(kind == "image" for kind, _, _ in parts):
            raise bad(f"messages.{i}", f"an image in a {m.role} message: images go in the user's turn")
        out.append((m.role, i, parts))
    return out
