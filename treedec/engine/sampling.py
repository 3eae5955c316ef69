"""How one page's tokens are chosen from the model's logits when a request says so (a served
request's sampling fields: `treedec.serve`): penalties over the stream's tokens, then the
greedy token or a draw from the tempered, filtered distribution. The same rule scores the
stream's last row and every draft node's row (each row's own context: the stream's tokens,
then the draft path to that node), so drafts are verified against the penalised logits and a
greedy page stays exactly what the stream would give without drafts.

The fields follow vLLM's sampling parameters (and so OpenAI's):

- `repetition_penalty` (HF/vLLM): a token seen in the prompt or the output has its logit divided
  by the penalty where positive, multiplied where negative;
- `presence_penalty`, `frequency_penalty` (OpenAI): subtracted once per token seen in the output,
  and once per occurrence;
- `no_repeat_ngram_size` (MinerU's logits processor, sent in `vllm_xargs`): a token that would
  repeat an n-gram of the output is banned;
- then greedy (`temperature` 0, or `top_k` 1) or, with a temperature, the logits divided by it,
  kept to the `top_k` largest, to `top_p`'s nucleus and above `min_p` x the largest probability,
  and one token drawn (a generator of the page's own, seeded by `seed`).

A drafted node's row is drawn from the model's own distribution after its path, so accepting
the draft while each draw equals the drafted token gives exactly the model's distribution:
sampling stays lossless under speculation (it accepts fewer drafts than greedy). "Output" is
every token after the root stream's prompt on the row's context: a branch's ancestors' tokens
count as its output (it does not see its siblings')."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from treedec.engine.draft import DraftTree
from treedec.graph import DecodingGraph

GREEDY_BELOW = 1e-5  # a temperature under this is greedy (vLLM's rule)


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: no top-k
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    no_repeat_ngram_size: int = 0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW or self.top_k == 1

    @property
    def penalised(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.presence_penalty != 0.0 or self.frequency_penalty != 0.0
                or self.no_repeat_ngram_size > 0)

    @property
    def plain(self) -> bool:
        """Greedy on the raw logits: the engine's own argmax gives the same tokens."""
        return self.greedy and not self.penalised

    def for_page(self) -> "PageSampler":
        return PageSampler(self)


@dataclass
class _NGrams:
    """A stream's output n-grams, built up as the stream grows (its tokens are only appended):
    the first n-1 tokens of each n-gram -> the tokens that followed them."""
    seen: int = 0  # output tokens already entered
    follow: dict[tuple[int, ...], set[int]] = field(default_factory=dict)


class PageSampler:
    """A `Sampling` applied to one page (its generator, its streams' n-gram tables)."""

    def __init__(self, sampling: Sampling):
        self.s = sampling
        self.generator = torch.Generator()
        if sampling.seed is not None:
            self.generator.manual_seed(int(sampling.seed))
        else:
            self.generator.seed()
        self._ngrams: dict[int, _NGrams] = {}

    def choose(self, graph: DecodingGraph, sid: int, tree: DraftTree | None, logits: torch.Tensor) -> list[int]:
        """The token after the stream's last token (row 0) and after each draft node (row i + 1)."""
        prompt_len = graph[0].prompt_len
        ctx = graph.context(sid)
        paths = [[]] + ([[tree.tokens[j] for j in tree.path(i)] for i in range(len(tree))] if tree else [])
        scores = logits.float().clone()
        if self.s.penalised:
            self._penalise(scores, sid, ctx, prompt_len, paths)
        if self.s.greedy:
            return scores.argmax(-1).tolist()
        return self._draw(scores)

    # ---------------------------------------------------------------- penalties
    def _penalise(self, scores: torch.Tensor, sid: int, ctx: list[int], prompt_len: int, paths: list[list[int]]) -> None:
        s, vocab = self.s, scores.shape[-1]
        out = torch.tensor(ctx[prompt_len:], dtype=torch.long)
        counts = torch.bincount(out[out < vocab], minlength=vocab)[:vocab].float() if len(out) else torch.zeros(vocab)
        in_prompt = torch.zeros(vocab, dtype=torch.bool)
        if s.repetition_penalty != 1.0:
            p = torch.tensor(ctx[:prompt_len], dtype=torch.long)
            in_prompt[p[(p >= 0) & (p < vocab)]] = True
        for r, path in enumerate(paths):
            c = counts.clone()
            for t in path:
                if 0 <= t < vocab:
                    c[t] += 1
            row = scores[r]
            if s.repetition_penalty != 1.0:
                seen = in_prompt | (c > 0)
                row[seen] = torch.where(row[seen] > 0, row[seen] / s.repetition_penalty, row[seen] * s.repetition_penalty)
            if s.frequency_penalty:
                row -= s.frequency_penalty * c
            if s.presence_penalty:
                row -= s.presence_penalty * (c > 0).float()
        if s.no_repeat_ngram_size > 0:
            self._no_repeat(scores, sid, ctx[prompt_len:], paths)

    def _no_repeat(self, scores: torch.Tensor, sid: int, out: list[int], paths: list[list[int]]) -> None:
        """Ban, per row, each token that would end an n-gram its output already holds."""
        n = self.s.no_repeat_ngram_size
        table = self._ngrams.setdefault(sid, _NGrams())
        for i in range(max(table.seen, n - 1), len(out)):  # the n-grams ending at out[i]
            table.follow.setdefault(tuple(out[i - n + 1:i]), set()).add(out[i])
        table.seen = len(out)
        for r, path in enumerate(paths):
            row_out = out + path
            extra: dict[tuple[int, ...], set[int]] = {}  # the path's own n-grams (never kept: a draft may be rejected)
            for i in range(max(len(out), n - 1), len(row_out)):
                extra.setdefault(tuple(row_out[i - n + 1:i]), set()).add(row_out[i])
            if len(row_out) < n - 1:
                continue
            key = tuple(row_out[len(row_out) - n + 1:]) if n > 1 else ()
            banned = table.follow.get(key, set()) | extra.get(key, set())
            if banned:
                scores[r, list(banned)] = float("-inf")

    # ---------------------------------------------------------------- drawing
    def _draw(self, scores: torch.Tensor) -> list[int]:
        s = self.s
        scores = scores / s.temperature
        if s.top_k and s.top_k > 0 and s.top_k < scores.shape[-1]:
            kth = torch.topk(scores, s.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if s.min_p > 0:
            probs = probs.masked_fill(probs < s.min_p * probs.max(-1, keepdim=True).values, 0.0)
        if s.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True, dim=-1)
            before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of the tokens ranked above each
            sorted_p = sorted_p.masked_fill(before >= s.top_p, 0.0)  # the first token always stays
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        return torch.multinomial(probs, 1, generator=self.generator)[:, 0].tolist()
