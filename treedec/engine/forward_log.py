"""What a run's forward passes did and cost, for the cost model (`treedec.results.cost_model`).

The engine adds every forward to the log its runtime hands it (`Engine(..., log=)`: a run makes
one, `treedec.run.parse_pages`; a staged strategy's runs are summed, `treedec.run.stages.merge`): a
step (its rows, the attention score elements handed to the kernels, the forward's seconds and
the whole step's, drafting, acceptance and bookkeeping included) or a prefill (its prompt
tokens, their causal score elements, the forward's seconds and the whole admission's). The
counts do not depend on the model's size under forcing; the seconds are this machine's."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields


@dataclass
class ForwardLog:
    steps: int = 0
    step_pages: int = 0  # pages with rows in the step, summed over steps
    step_rows: int = 0
    step_attn: int = 0  # score elements (rows x keys) handed to the attention kernels
    step_forward_s: float = 0.0  # the model's forwards alone
    step_forward_cpu_s: float = 0.0  # ... in the process's CPU seconds
    step_s: float = 0.0  # the engine's whole steps (drafting, the forward, acceptance, bookkeeping)
    prefills: int = 0
    prefill_tokens: int = 0
    prefill_attn: int = 0  # causal score elements: n (n + 1) / 2 per prompt of n tokens
    prefill_forward_s: float = 0.0
    prefill_forward_cpu_s: float = 0.0
    admit_s: float = 0.0  # the whole admissions (the forcing's trie, prefill, first token)
    # steps by their rows and pages ("ROWSxPAGES", each `rows_bucket`ed; "ROWSxPAGESb" for page-blocked attention) ->
    # [steps, pages, rows, attention] summed: a step's cost is not linear in its rows (on this CPU 2 and 3 rows cost
    # more than 4), HSD's stage 1 (many crops, short KV) and stage 2 (few pages, long KV) differ at the same rows, and
    # a blocked step's attention elements are its pages' own keys where a dense step's are the whole arena's, so the
    # cost model times the buckets run
    by_rows: dict = field(default_factory=dict)
    # the same buckets -> their steps' forward CPU seconds (a timing, apart from the counts): where a projection misses
    by_rows_forward_cpu_s: dict = field(default_factory=dict)

    def add_step(self, pages: int, rows: int, attn: int, forward: tuple[float, float], step_s: float,
                 blocked: bool = False) -> None:
        """`forward`: the forward's (wall, CPU) seconds (`forward_clock`); `blocked`: page-blocked attention."""
        self.steps += 1
        self.step_pages += pages
        self.step_rows += rows
        self.step_attn += attn
        self.step_forward_s += forward[0]
        self.step_forward_cpu_s += forward[1]
        self.step_s += step_s
        key = f"{rows_bucket(rows)}x{rows_bucket(pages)}{'b' if blocked else ''}"
        b = self.by_rows.setdefault(key, [0, 0, 0, 0])
        for i, v in enumerate((1, pages, rows, attn)):
            b[i] += v
        self.by_rows_forward_cpu_s[key] = self.by_rows_forward_cpu_s.get(key, 0.0) + forward[1]

    def add_prefill(self, tokens: int, forward: tuple[float, float], admit_s: float) -> None:
        self.prefills += 1
        self.prefill_tokens += tokens
        self.prefill_attn += tokens * (tokens + 1) // 2
        self.prefill_forward_s += forward[0]
        self.prefill_forward_cpu_s += forward[1]
        self.admit_s += admit_s

    @property
    def forward_cpu_s(self) -> float:
        return self.step_forward_cpu_s + self.prefill_forward_cpu_s

    @property
    def forward_s(self) -> float:
        return self.step_forward_s + self.prefill_forward_s

    @property
    def engine_s(self) -> float:
        """Seconds inside the engine's steps and admissions (their forwards included)."""
        return self.step_s + self.admit_s

    def figures(self) -> dict:
        return asdict(self)

    def __iadd__(self, other: "ForwardLog") -> "ForwardLog":
        for f in fields(self):
            if f.name == "by_rows":
                for k, v in other.by_rows.items():
                    b = self.by_rows.setdefault(k, [0, 0, 0, 0])
                    for i, x in enumerate(v):
                        b[i] += x
            elif f.name == "by_rows_forward_cpu_s":
                for k, x in other.by_rows_forward_cpu_s.items():
                    self.by_rows_forward_cpu_s[k] = self.by_rows_forward_cpu_s.get(k, 0.0) + x
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def rows_bucket(rows: int) -> int:
    """A count as it is up to 8, then in steps of about 19 % (8, 10, 12, 15, 18, 22, ...)."""
    if rows <= 8:
        return rows
    b = 8
    while b * 1.19 < rows:
        b = round(b * 1.19 + 0.5)
    return b if rows - b < round(b * 1.19 + 0.5) - rows else round(b * 1.19 + 0.5)


def clock() -> tuple[float, float]:
    """(wall, process CPU) seconds now; differences of two readings time a forward both ways."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clock()
    return now[0] - start[0], now[1] - start[1]
