"""Does treedec decode a checkpoint exactly as transformers does? Each page is decoded
greedily by treedec's engine (strategy `sequential`) and by transformers' own `generate`
(do_sample=False) from the same prompt ids and image inputs (and `mm_token_type_ids`
where the family takes them), with the same end-of-sequence ids and token budget; the two
outputs are compared token by token (`python -m treedec check`).

A page `agrees` when both outputs are the same ids. Otherwise the first divergence is
reported with the two candidate tokens' logits there (transformers' logits, on the
context both still share): a gap below `NEAR_TIE` is a near-tie (a float rounding
difference may flip it, and the rest of the output is then another, equally greedy,
continuation); any other divergence is a bug in the loader, the adapter or the engine.

With a second runtime (`runtime=vllm`), its output ids (strategy `sequential`, the same
prompt mode and token budget: `runtime_outputs`) are compared with the same `generate`
output the same way, per page (`PageCheck.runtime`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from treedec.engine.engine import Engine, EngineConfig
from treedec.models.adapter import Prompt
from treedec.strategies.base import STRATEGIES

NEAR_TIE = 1e-4


@dataclass
class PageCheck:
    name: str
    prompt_tokens: int
    treedec_tokens: int
    transformers_tokens: int
    agreed_tokens: int  # the common prefix of the two outputs
    verdict: str  # agrees | near_tie | diverged
    diverged_at: int | None = None  # output index of the first divergence
    treedec_token: int | None = None
    transformers_token: int | None = None
    treedec_token_logit: float | None = None  # transformers' logits there, for each candidate
    transformers_token_logit: float | None = None
    gap: float | None = None
    runtime: "PageCheck | None" = None  # a second runtime's output against the same generate (its `treedec_*`: that
    # runtime's), e.g. vLLM's

    def figures(self) -> dict:
        return asdict(self)


def transformers_generate(vlm, prompt: Prompt, max_new: int) -> tuple[list[int], list[torch.Tensor]]:
    """transformers' greedy `generate` on the prompt's ids and image inputs: the new ids and
    each step's raw logits [V]."""
    model, tok = vlm.model, vlm.tokenizer
    dev = next(model.parameters()).device
    ids = torch.tensor([prompt.ids], device=dev)
    extra = {k: v.to(dev) for k, v in vlm.generate_inputs(prompt).items()}
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **extra, max_new_tokens=max_new,
                         do_sample=False, num_beams=1, eos_token_id=list(tok.eos_ids), pad_token_id=tok.pad_id,
                         output_logits=True, return_dict_in_generate=True, temperature=None, top_p=None, top_k=None,
                         repetition_penalty=None)
    return out.sequences[0, len(prompt.ids):].tolist(), [x[0].float().cpu() for x in out.logits]


def engine_outputs(vlm, prompts: dict[str, Prompt], max_new: int) -> dict[str, list[int]]:
    """treedec's engine, strategy `sequential`: every page's output ids (root stream after its prompt)."""
    engine = Engine(vlm.adapter(), STRATEGIES.get("sequential")(vlm.tokenizer), EngineConfig(max_new_tokens=max_new))
    return {r.name: r.graph[0].tokens[len(prompts[r.name].ids):]
            for r in engine.run([(n, p, None) for n, p in prompts.items()])}


def compare(name: str, prompt_len: int, ours: list[int], theirs: list[int], logits: list[torch.Tensor]) -> PageCheck:
    """The two outputs of one page, and their first divergence with its logits."""
    agreed = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    check = PageCheck(name, prompt_len, len(ours), len(theirs), agreed, "agrees")
    if ours == theirs:
        return check
    check.diverged_at = agreed
    a = ours[agreed] if agreed < len(ours) else None  # None: that side stopped there
    b = theirs[agreed] if agreed < len(theirs) else None
    check.treedec_token, check.transformers_token = a, b
    if agreed < len(logits) and a is not None and b is not None:
        row = logits[agreed]
        check.treedec_token_logit, check.transformers_token_logit = float(row[a]), float(row[b])
        check.gap = abs(check.transformers_token_logit - check.treedec_token_logit)
    check.verdict = "near_tie" if check.gap is not None and check.gap < NEAR_TIE else "diverged"
    return check


def runtime_outputs(runtime, vlm, samples, mode: str) -> dict[str, list[int]]:
    """`runtime`'s output ids (root stream after its prompt) of every sample, strategy
    `sequential` asked in prompt `mode`, its token budget the runtime's `max_new_tokens`."""
    from dataclasses import replace

    strategy = replace(STRATEGIES.get("sequential")(vlm.tokenizer), mode=mode)
    runtime.check(vlm, strategy)
    items = [(s.name, runtime.prompt(vlm, strategy, s), s) for s in samples]
    return {r.name: r.graph[0].tokens[r.graph[0].prompt_len:] for r in runtime.decode(vlm, strategy, items)}


def check_pages(vlm, samples, mode: str, max_new: int, runtime=None) -> list[PageCheck]:
    """Every sample decoded both ways and compared (see the module doc); `runtime` (its
    `max_new_tokens` = `max_new`): its outputs compared too, under each page's `runtime`."""
    others = runtime_outputs(runtime, vlm, samples, mode) if runtime is not None else {}  # first: its refusals
    prompts = {s.name: vlm.prompt(s.image, mode) for s in samples}
    ours = engine_outputs(vlm, prompts, max_new)
    out = []
    for name, prompt in prompts.items():
        theirs, logits = transformers_generate(vlm, prompt, max_new)
        out.append(compare(name, len(prompt.ids), ours[name], theirs, logits))
        if runtime is not None:
            out[-1].runtime = compare(name, len(prompt.ids), others[name], theirs, logits)
    return out
