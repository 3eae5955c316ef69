"""What a run's forward passes did and cost, for the cost model (`treedec.cost_model`).

The engine adds every pass to the log `recording()` opened (a run opens one; a run inside
it, HSD's stage 1 or the crops' engines, records into the same): a step (its rows, the
attention score elements handed to the kernels, the forward's seconds and the whole step's,
drafting, acceptance and bookkeeping included) or a prefill (its prompt tokens, their causal
score elements, the forward's seconds and the whole admission's). The counts do not depend on
the model's size under forcing; the seconds are this machine's."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Iterator


@dataclass
class PassLog:
    steps: int = 0
    step_pages: int = 0  # pages with rows in the step, summed over steps
    step_rows: int = 0
    step_attn: int = 0  # score elements (rows x keys) handed to the attention kernels
    step_forward_s: float = 0.0  # the model's forwards alone
    step_s: float = 0.0  # the engine's whole steps (drafting, the forward, acceptance, bookkeeping)
    prefills: int = 0
    prefill_tokens: int = 0
    prefill_attn: int = 0  # causal score elements: n (n + 1) / 2 per prompt of n tokens
    prefill_forward_s: float = 0.0
    admit_s: float = 0.0  # the whole admissions (the forcing's trie, prefill, first token)

    def add_step(self, pages: int, rows: int, attn: int, forward_s: float, step_s: float) -> None:
        self.steps += 1
        self.step_pages += pages
        self.step_rows += rows
        self.step_attn += attn
        self.step_forward_s += forward_s
        self.step_s += step_s

    def add_prefill(self, tokens: int, forward_s: float, admit_s: float) -> None:
        self.prefills += 1
        self.prefill_tokens += tokens
        self.prefill_attn += tokens * (tokens + 1) // 2
        self.prefill_forward_s += forward_s
        self.admit_s += admit_s

    @property
    def forward_s(self) -> float:
        return self.step_forward_s + self.prefill_forward_s

    @property
    def engine_s(self) -> float:
        """Seconds inside the engine's passes (steps and admissions, forwards included)."""
        return self.step_s + self.admit_s

    def figures(self) -> dict:
        return asdict(self)

    def __iadd__(self, other: "PassLog") -> "PassLog":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


_active: list[PassLog] = []


@contextmanager
def recording() -> Iterator[PassLog]:
    """The log the engine's passes go to until the block ends; inside another, that one."""
    if _active:
        yield _active[-1]
        return
    log = PassLog()
    _active.append(log)
    try:
        yield log
    finally:
        _active.pop()


def current() -> PassLog | None:
    return _active[-1] if _active else None
