"""Tree-varlen attention: ancestor attention over a packed tree, with no dense L x L mask.

A packed tree is one sequence holding every stream's tokens back to back (pages too);
`TreeLayout` says, per stream (segment), which ancestor prefixes it sees. Each query
attends to (a) each ancestor's first `end` tokens and (b) its own segment causally.

`tree_attention` is one autograd Function with a flash-attention-style backward. Its
forward splits the visible keys of every query into parts, computes each part's output
and log-sum-exp, and merges them with the online-softmax rule; it saves only q, k, v,
the final output and the final log-sum-exp per query. Its backward recomputes each
part's probabilities from the final log-sum-exp (P = exp(S - lse)) and, with
D = rowsum(dO * O) of the final output, accumulates each part's dQ, dK, dV -- the parts
are independent given (O, lse). Nothing of size L x L, and no part's scores, is kept.

Parts (the layout's `plan`, built once per layout and cached on it):
- own segments, causal: segments of similar length (>= `BUCKET_RATIO` of the longest)
  are padded to the longest of their bucket and run as one batch; padding sits after
  every real key, so causality hides it, and its outputs and gradients go to a sink row;
- ancestor prefixes: all viewers of one ancestor segment form a group, sorted by how much
  of it they see and cut into chunks of `ANCESTOR_ROWS` query rows; a chunk attends to the
  first `width` tokens of the ancestor (its largest visible end), with an additive per-row
  mask (built per call, `rows x width`) only when its rows see different amounts.
All parts' outputs are merged in one scatter (out = sum_p w_p o_p / sum_p w_p with
w_p = exp(lse_p - max)), and all parts' gradients are scattered back in one index_add
per tensor: few, large tensor ops, since each small op costs a thread wake-up.

Kernels: on CPU torch's fused flash-attention kernel (which returns the log-sum-exp and
whose backward takes the final output and log-sum-exp); elsewhere (or `backend="math"`)
plain matmuls in float32, in chunks of `chunk` queries so memory stays bounded.
Inputs are computed in their own dtype, or in the autocast dtype when autocast is on
(as SDPA would be); the merge, the log-sum-exp and the gradient sums are float32
(float64 for float64 inputs). Grouped-query k/v heads are repeated inside the Function
and their gradients summed back.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

NEG = float("-inf")
ANCESTOR_ROWS = 512  # query rows per ancestor chunk (bounds the per-chunk mask: rows x width)
BUCKET_RATIO = 0.75  # own segments share a padded batch when at least this fraction of its longest
MATH_CHUNK = 1024  # default query chunk of the matmul backend


@dataclass(frozen=True)
class Segment:
    start: int  # first index in the packed sequence
    length: int
    prefix: tuple[tuple[int, int], ...] = ()  # (ancestor segment index, tokens of it visible)


@dataclass(frozen=True)
class TreeLayout:
    segments: tuple[Segment, ...]

    @property
    def total(self) -> int:
        return sum(s.length for s in self.segments)

    def dense_mask(self) -> torch.Tensor:
        """The equivalent boolean L x L mask (True = attend), for reference paths and tests."""
        L = self.total
        m = torch.zeros(L, L, dtype=torch.bool)
        for s in self.segments:
            rows = slice(s.start, s.start + s.length)
            m[rows, rows] = torch.ones(s.length, s.length, dtype=torch.bool).tril()
            for a, end in s.prefix:
                anc = self.segments[a]
                m[rows, anc.start:anc.start + end] = True
        return m

    def plan(self, device: torch.device | str = "cpu") -> "_Plan":
        """The attention parts (cached on the layout, per device)."""
        device = torch.device(device)
        cache = self.__dict__.setdefault("_plans", {})  # frozen dataclass: write the dict directly
        if device not in cache:
            cache[device] = _build_plan(self, device)
        return cache[device]


# ----------------------------------------------------------------------------- plan
@dataclass
class _Rows:
    """A set of packed positions: a slice when contiguous, else an index."""
    sl: slice | None
    idx: torch.Tensor

    @staticmethod
    def of(idx: torch.Tensor) -> "_Rows":
        n = idx.numel()
        first = int(idx[0]) if n else 0
        contiguous = n > 0 and bool((idx == torch.arange(first, first + n, device=idx.device)).all())
        return _Rows(slice(first, first + n) if contiguous else None, idx)

    def take(self, t: torch.Tensor) -> torch.Tensor:
        return t[self.sl] if self.sl is not None else t.index_select(0, self.idx)


@dataclass
class _Own:
    """Own segments of similar length, run causally as one [batch, width] padded batch.

    Padding sits after each segment's tokens, so causality hides it from the real rows; it
    gathers a copy of a real row, its outputs and key gradients go to a sink row L, and in
    backward its log-sum-exp is +inf, so P = exp(S - inf) = 0 and no gradient comes from it."""
    batch: int
    width: int
    rows: _Rows  # batch * width positions to gather (padding: the segment's first token)
    sunk: torch.Tensor | None  # the same with padding -> L (None without padding)


@dataclass
class _Chunk:
    """Query rows that see a prefix of one ancestor: keys = packed[key]."""
    key: slice  # the first `width` tokens of the ancestor (the chunk's largest visible end)
    rows: _Rows
    r0: int  # the rows' place in their group's mask
    masked: bool  # some rows see fewer than `width` tokens


@dataclass
class _Group:
    """All rows that see a prefix of one ancestor segment, sorted by visible length, in chunks."""
    ends: torch.Tensor  # [n] visible tokens per row
    width: int
    chunks: list[_Chunk]

    def mask(self, dtype: torch.dtype) -> torch.Tensor | None:
        """Additive [n, width] mask (0 = visible, -inf = not), or None when no chunk needs one."""
        if not any(c.masked for c in self.chunks):
            return None
        see = torch.arange(self.width, device=self.ends.device)[None, :] < self.ends[:, None]
        return torch.where(see, torch.zeros((), dtype=dtype, device=see.device),
                           torch.full((), NEG, dtype=dtype, device=see.device))


@dataclass
class _Plan:
    total: int
    own: list[_Own]
    groups: list[_Group]
    sink: bool  # some own batch is padded (outputs of padding go to row L)
    out_idx: torch.Tensor  # packed row of every part output row, in order (own batches, then chunks)
    key_idx: torch.Tensor  # packed row of every part's key rows, in the same order


def _build_plan(tree: TreeLayout, device: torch.device) -> _Plan:
    segs = tree.segments
    L = tree.total
    at = 0
    for s in segs:
        if s.start != at or s.length < 1:
            raise ValueError(f"segments must tile the packed sequence: {s} at {at}")
        at += s.length
    own: list[_Own] = []
    out_idx: list[torch.Tensor] = []
    key_idx: list[torch.Tensor] = []
    order = sorted(range(len(segs)), key=lambda i: -segs[i].length)
    while order:  # own segments: buckets of similar length, padded to the longest
        width = segs[order[0]].length
        n = 1
        while n < len(order) and segs[order[n]].length >= BUCKET_RATIO * width:
            n += 1
        take, order = order[:n], order[n:]
        idx = torch.full((n, width), L, dtype=torch.long)
        for b, i in enumerate(take):
            idx[b, :segs[i].length] = torch.arange(segs[i].start, segs[i].start + segs[i].length)
        sunk = idx.flatten()
        gather = torch.where(idx < L, idx, idx[:, :1]).flatten()
        own.append(_Own(n, width, _Rows.of(gather.to(device)), sunk.to(device) if bool((sunk == L).any()) else None))
        out_idx.append(sunk)
        key_idx.append(sunk)
    viewers: dict[int, list[tuple[int, int]]] = {}
    for i, s in enumerate(segs):
        if len({a for a, _ in s.prefix}) != len(s.prefix):
            raise ValueError(f"segment {i} lists an ancestor twice: {s.prefix}")
        for a, end in s.prefix:
            if a == i or not 0 <= end <= segs[a].length:
                raise ValueError(f"segment {i} sees {end} tokens of segment {a} (length {segs[a].length})")
            if end > 0:
                viewers.setdefault(a, []).append((i, end))
    groups: list[_Group] = []
    for a, views in viewers.items():  # ancestor prefixes: every viewer of `a`, by visible length
        views.sort(key=lambda v: v[1])
        rows = torch.cat([torch.arange(segs[i].start, segs[i].start + segs[i].length) for i, _ in views])
        ends = torch.cat([torch.full((segs[i].length,), end) for i, end in views])
        start = segs[a].start
        chunks = []
        for c0 in range(0, rows.numel(), ANCESTOR_ROWS):
            r, e = rows[c0:c0 + ANCESTOR_ROWS], ends[c0:c0 + ANCESTOR_ROWS]
            width = int(e.max())
            chunks.append(_Chunk(slice(start, start + width), _Rows.of(r.to(device)), c0, bool((e < width).any())))
            out_idx.append(r)
            key_idx.append(torch.arange(start, start + width))
        groups.append(_Group(ends.to(device), int(ends.max()), chunks))
    sink = any(o.sunk is not None for o in own)
    return _Plan(L, own, groups, sink, torch.cat(out_idx).to(device), torch.cat(key_idx).to(device))


# ----------------------------------------------------------------------------- kernels
def _attn_fwd(q, k, v, causal: bool, mask, scale: float, backend: str, chunk: int):
    """q: [B, H, Q, D]; k, v: [B, H, K, D]; mask: additive [B|1, 1, Q|1, K] in q's dtype or None.
    Returns (out [B, H, Q, D] in q's dtype, lse [B, H, Q] in the accumulation dtype)."""
    if backend == "flash":
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
        return o, lse.to(_acc(q.dtype))
    B, H, Q, D = q.shape
    o = q.new_empty(B, H, Q, D)
    lse = q.new_empty(B, H, Q, dtype=_acc(q.dtype))
    kf, vf = _up(k), _up(v)
    for c0 in range(0, Q, chunk):
        c1 = min(Q, c0 + chunk)
        kn = min(k.shape[2], c1) if causal else k.shape[2]
        s = _scores(_up(q[:, :, c0:c1]), kf[:, :, :kn], causal, mask, c0, c1, scale)
        l = torch.logsumexp(s, -1)
        o[:, :, c0:c1] = torch.matmul(torch.exp(s - l[..., None]), vf[:, :, :kn]).to(o.dtype)
        lse[:, :, c0:c1] = l
    return o, lse


def _attn_bwd(do, q, k, v, o, lse, causal: bool, mask, scale: float, backend: str, chunk: int):
    """Gradients of one part given the FINAL output o and log-sum-exp lse of its query rows."""
    if backend == "flash":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            do, q, k, v, o, lse, 0.0, causal, attn_mask=mask, scale=scale)
    Q, K = q.shape[2], k.shape[2]
    qf, kf, vf, dof = _up(q), _up(k), _up(v), _up(do)
    dsum = (dof * _up(o)).sum(-1)  # D = rowsum(dO * O)
    dq = torch.empty_like(qf)
    dk, dv = torch.zeros_like(kf), torch.zeros_like(vf)
    for c0 in range(0, Q, chunk):
        c1 = min(Q, c0 + chunk)
        kn = min(K, c1) if causal else K
        qc, doc = qf[:, :, c0:c1], dof[:, :, c0:c1]
        p = torch.exp(_scores(qc, kf[:, :, :kn], causal, mask, c0, c1, scale) - lse[:, :, c0:c1, None])
        dv[:, :, :kn] += torch.matmul(p.transpose(-1, -2), doc)
        ds = p * (torch.matmul(doc, vf[:, :, :kn].transpose(-1, -2)) - dsum[:, :, c0:c1, None])
        dq[:, :, c0:c1] = torch.matmul(ds, kf[:, :, :kn]) * scale
        dk[:, :, :kn] += torch.matmul(ds.transpose(-1, -2), qc) * scale
    return dq, dk, dv


def _acc(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: float32, or float64 for float64 inputs."""
    return torch.promote_types(dtype, torch.float32)


def _up(t: torch.Tensor) -> torch.Tensor:
    return t.to(_acc(t.dtype))


def _scores(q, k, causal: bool, mask, c0: int, c1: int, scale: float):
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # [B, H, c, kn]
    kn = k.shape[2]
    if mask is not None:
        s = s + (mask[:, :, c0:c1, :kn] if mask.shape[2] > 1 else mask[:, :, :, :kn]).to(s.dtype)
    if causal:
        keep = torch.arange(c0, c1, device=s.device)[:, None] >= torch.arange(kn, device=s.device)[None]
        s = s.masked_fill(~keep, NEG)
    return s


# ----------------------------------------------------------------------------- tree forward/backward
# Layouts: the packed tensors are token-major [L, H, D]; kernels take [B, H, n, D] views of them.
# Few, large tensor ops on purpose: every part's output (or gradient) is collected and scattered
# back in one op, since each small op costs a thread wake-up on a busy CPU.
def _heads(t: torch.Tensor) -> torch.Tensor:
    """[n, H, D] token-major rows -> [1, H, n, D] view."""
    return t.transpose(0, 1)[None]


def _batch(t: torch.Tensor, b: _Own) -> torch.Tensor:
    """[batch * width, H, ...] -> [batch, H, width, ...] view."""
    return t.view(b.batch, b.width, *t.shape[1:]).transpose(1, 2)


def _flat(t: torch.Tensor) -> torch.Tensor:
    """[batch, H, width, ...] -> [batch * width, H, ...] (a view for the flash kernel's outputs)."""
    t = t.transpose(1, 2)
    return t.reshape(t.shape[0] * t.shape[1], *t.shape[2:])


def _tree_fwd(q, k, v, plan: _Plan, scale: float, backend: str, chunk: int):
    """q, k, v: [L, H, D] (same heads, same dtype). Returns (out [L, H, D] in q's dtype, lse [L, H])."""
    L, H, D = q.shape
    acc_t = _acc(q.dtype)
    outs, lses = [], []
    for b in plan.own:  # own segments, causal
        o, l = _attn_fwd(*(_batch(b.rows.take(t), b) for t in (q, k, v)), True, None, scale, backend, chunk)
        outs.append(_flat(o))
        lses.append(_flat(l))
    for grp in plan.groups:  # ancestor prefixes
        mask = grp.mask(q.dtype)
        for c in grp.chunks:
            m = mask[None, None, c.r0:c.r0 + _n(c), :c.key.stop - c.key.start] if c.masked else None
            o, l = _attn_fwd(_heads(c.rows.take(q)), _heads(k[c.key]), _heads(v[c.key]), False, m, scale, backend,
                             chunk)
            outs.append(o[0].transpose(0, 1))
            lses.append(l[0].transpose(0, 1))
    if not plan.groups:  # every row has exactly one part
        out = q.new_empty(L + int(plan.sink), H, D)
        lse = q.new_empty(L + int(plan.sink), H, dtype=acc_t)
        out.index_copy_(0, plan.out_idx, torch.cat(outs))
        lse.index_copy_(0, plan.out_idx, torch.cat(lses).to(acc_t))
        return out[:L], lse[:L]
    # merge all parts at once with the online-softmax rule: out = sum_p w_p o_p / sum_p w_p, w_p = exp(lse_p - m)
    idx = plan.out_idx
    lse_p = torch.cat(lses).to(acc_t)  # [R, H]
    m = lse_p.new_full((L + 1, H), NEG).scatter_reduce_(0, idx[:, None].expand(-1, H), lse_p, "amax")
    w = torch.exp(lse_p - m.index_select(0, idx))
    den = lse_p.new_zeros(L + 1, H).index_add_(0, idx, w)
    acc = lse_p.new_zeros(L + 1, H, D).index_add_(0, idx, torch.cat(outs) * w[..., None])
    out = (acc[:L] / den[:L, :, None]).to(q.dtype)
    return out, m[:L] + torch.log(den[:L])


def _n(c: _Chunk) -> int:
    return c.rows.idx.numel()


def _tree_bwd(do, q, k, v, out, lse, plan: _Plan, scale: float, backend: str, chunk: int):
    L, H, D = q.shape
    acc_t = _acc(q.dtype)
    gqs, gks, gvs = [], [], []
    lse_sink = torch.cat([lse, lse.new_full((1, H), float("inf"))]) if plan.sink else lse  # padding: P = 0
    for b in plan.own:
        lb = _batch(b.rows.take(lse) if b.sunk is None else lse_sink.index_select(0, b.sunk), b)
        qb, kb, vb, ob, dob = (_batch(b.rows.take(t), b) for t in (q, k, v, out, do))
        gq, gk, gv = _attn_bwd(dob, qb, kb, vb, ob, lb, True, None, scale, backend, chunk)
        gqs.append(_flat(gq))
        gks.append(_flat(gk))
        gvs.append(_flat(gv))
    for grp in plan.groups:
        mask = grp.mask(q.dtype)
        for c in grp.chunks:
            m = mask[None, None, c.r0:c.r0 + _n(c), :c.key.stop - c.key.start] if c.masked else None
            gq, gk, gv = _attn_bwd(_heads(c.rows.take(do)), _heads(c.rows.take(q)), _heads(k[c.key]),
                                   _heads(v[c.key]), _heads(c.rows.take(out)), c.rows.take(lse).t()[None], False, m,
                                   scale, backend, chunk)
            gqs.append(gq[0].transpose(0, 1))
            gks.append(gk[0].transpose(0, 1))
            gvs.append(gv[0].transpose(0, 1))
    rows = L + 1  # + the sink row, dropped
    dq = q.new_zeros(rows, H, D, dtype=acc_t).index_add_(0, plan.out_idx, torch.cat(gqs).to(acc_t))
    dk = q.new_zeros(rows, H, D, dtype=acc_t).index_add_(0, plan.key_idx, torch.cat(gks).to(acc_t))
    dv = q.new_zeros(rows, H, D, dtype=acc_t).index_add_(0, plan.key_idx, torch.cat(gvs).to(acc_t))
    return dq[:L], dk[:L], dv[:L]


def _repeat_heads(t: torch.Tensor, groups: int) -> torch.Tensor:
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)


class TreeAttention(torch.autograd.Function):
    """q: [L, H, D]; k, v: [L, Hkv, D] (token-major, one dtype). Returns out [L, H, D]."""

    @staticmethod
    def forward(ctx, q, k, v, plan: _Plan, scale: float, backend: str, chunk: int):
        groups = q.shape[1] // k.shape[1]
        with torch.autocast(q.device.type, enabled=False):
            out, lse = _tree_fwd(q, _repeat_heads(k, groups), _repeat_heads(v, groups), plan, scale, backend, chunk)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (plan, scale, backend, chunk, groups)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        plan, scale, backend, chunk, groups = ctx.args
        with torch.autocast(q.device.type, enabled=False):
            dq, dk, dv = _tree_bwd(dout.to(q.dtype).contiguous(), q, _repeat_heads(k, groups),
                                   _repeat_heads(v, groups), out, lse, plan, scale, backend, chunk)
        if groups > 1:
            dk = dk.view(k.shape[0], k.shape[1], groups, -1).sum(2)
            dv = dv.view(v.shape[0], v.shape[1], groups, -1).sum(2)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def tree_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tree: TreeLayout, scale: float,
                   backend: str | None = None, chunk: int = MATH_CHUNK) -> torch.Tensor:
    """q: [1, H, L, D]; k, v: [1, Hkv, L, D] (grouped heads allowed). Returns [1, L, H, D].

    backend: "flash" (torch's CPU flash kernel; the CPU default) or "math" (chunked matmuls,
    any device); chunk: query rows per matmul chunk of the math backend."""
    dev = q.device.type
    backend = backend or ("flash" if dev == "cpu" else "math")
    if backend == "flash" and dev != "cpu":
        raise ValueError("the flash backend is CPU-only; use backend='math'")
    if torch.is_autocast_enabled(dev):
        dtype = torch.get_autocast_dtype(dev)
    else:
        dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype)
    if q.shape[0] != 1 or q.shape[1] % k.shape[1]:
        raise ValueError(f"expected q [1, H, L, D] and k, v [1, Hkv, L, D] with Hkv | H; got {q.shape}, {k.shape}")
    if q.shape[2] != tree.total:
        raise ValueError(f"sequence length {q.shape[2]} != tree total {tree.total}")
    qt, kt, vt = (t.squeeze(0).transpose(0, 1).to(dtype) for t in (q, k, v))  # token-major [L, H, D] views
    return TreeAttention.apply(qt, kt, vt, tree.plan(q.device), float(scale), backend, int(chunk))[None]
