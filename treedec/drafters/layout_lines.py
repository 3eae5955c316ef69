"""Drafting a layout stream line by line from a draft layout (treedec's; `layout=lines`).

A layout stream is a sequence of lines `<BLOCK><|cat|>[x1,y1,x2,y2]<FORK>` and `<eos>`.
Matching it n-gram-wise against a pipeline's layout fails where it matters: the streams
are short, their n-grams repeat (`62,`, `938,`), and one wrong box or a merged block
leaves nothing to match until the stream is back in step. Lines and fields are the
natural unit instead. With the stream's current line typed up to some point, every
draft line proposes the rest of a line made of the typed part, the rest of the field
being typed (completed from the values any draft line has in that field), the draft
line's remaining fields, and then the draft lines that follow it. So a line whose box
the pipeline got one field wrong still drafts its other fields, and after every line the
next draft lines are proposed whole, in whatever order the target takes them.

Verification stays exact: these are proposals only.
"""
from __future__ import annotations

from treedec.drafters.ngram import prefix_tree
from treedec.engine.draft import DraftTree


class LayoutLines:
    """One draft layout, as lines of token ids, for a tokenizer's control ids."""

    def __init__(self, layout: list[int], block_id: int, eos_id: int, comma_id: int, open_id: int, close_id: int,
                 grid_values: list[list[tuple[int, ...]]] | None = None):
        self.block, self.comma, self.open, self.close = block_id, comma_id, open_id, close_id
        self.grid_values = grid_values or [[] for _ in range(4)]
        self.lines: list[list[int]] = []
        for t in layout:
            if t == eos_id:
                break
            if t == block_id or not self.lines:
                self.lines.append([])
            self.lines[-1].append(t)
        self.lines.append([eos_id])
        self.parsed = [self._fields(line) for line in self.lines]
        # every value drafted for field k, in draft order, without repeats
        self.values: list[list[tuple[int, ...]]] = [[] for _ in range(4)]
        for p in self.parsed:
            for k, v in enumerate(p[1] if p else []):
                if k < 4 and tuple(v) not in self.values[k]:
                    self.values[k].append(tuple(v))

    @classmethod
    def of(cls, layout: list[int], tok, grid_values: list[list[tuple[int, ...]]] | None = None) -> "LayoutLines":
        """`layout` (token ids of a layout stream, or of a flat stream) with `tok`'s control ids."""
        comma, open_, close = (tok.encode(c)[0] for c in ",[]")
        return cls(layout, tok.block_id, tok.eos_id, comma, open_, close, grid_values)

    def _fields(self, line: list[int]):
        """(head `<BLOCK><|cat|>[`, fields, tail `]...`) of a line with a box, else None.
        The last field may be unfinished (no tail yet)."""
        if len(line) < 3 or line[0] != self.block or line[2] != self.open:
            return None
        body = line[3:]
        end = body.index(self.close) if self.close in body else len(body)
        fields: list[list[int]] = [[]]
        for t in body[:end]:
            if t == self.comma:
                fields.append([])
            else:
                fields[-1].append(t)
        return line[:3], fields, body[end:]

    def candidates(self, own: list[int], max_depth: int) -> list[list[int]]:
        """Continuations of a stream that has produced `own`, most plausible first."""
        blocks = [i for i, t in enumerate(own) if t == self.block]
        if not blocks:
            return [self._after(i - 1, max_depth) for i in range(len(self.lines))] if not own else []
        start = blocks[-1]
        cur = own[start:]
        typed = self._fields(cur)
        # the draft line expected next: after the one the previous line equals, else by count
        expected = len(blocks) - 1
        if len(blocks) > 1 and (prev := own[blocks[-2]:start]) in self.lines:
            expected = self.lines.index(prev) + 1
        n = len(self.lines)
        out: list[tuple[int, int, list[int]]] = []  # (-agreement, draft index, continuation)
        for i, (line, parsed) in enumerate(zip(self.lines, self.parsed)):
            if line[:len(cur)] == cur:
                out.append((-len(cur), i, line[len(cur):] + self._after(i, max_depth)))
                continue
            if len(cur) == 2 and len(line) > 2 and line[0] == self.block:  # another category, this box
                out.append((-1, i, line[2:] + self._after(i, max_depth)))
                continue
            if typed is None or parsed is None:
                continue
            for rest in self._hybrids(typed, parsed):
                agree = (cur[1] == line[1]) + sum(a == b for a, b in zip(typed[1][:-1], parsed[1]))
                out.append((-agree, i, rest + self._after(i, max_depth)))
        out.sort(key=lambda c: (c[0], (c[1] - expected) % n))
        return [c[2][:max_depth] for c in out if c[2]]

    def _hybrids(self, typed, parsed) -> list[list[int]]:
        """Rests of the current line after this draft line's fields: the field being typed
        completed with a drafted value for that field (this line's own first), then the
        draft line's later fields and its end; a closed box goes on with the line's end."""
        _, have, tail = typed
        _, fields, line_tail = parsed
        if tail:
            return [line_tail[len(tail):]] if line_tail[:len(tail)] == tail else []
        k, part = len(have) - 1, have[-1]
        if k >= min(len(fields), 4):
            return []
        later: list[int] = []
        for f in fields[k + 1:]:
            later += [self.comma] + f
        later += line_tail
        own_value = tuple(fields[k])
        values = [own_value] + [v for v in self.values[k] if v != own_value]
        if part:  # once a digit is typed, any value on the model's grid that starts with it
            values += [v for v in self.grid_values[k] if v not in values]
        return [list(v[len(part):]) + later for v in values if list(v[:len(part)]) == part]

    def _after(self, i: int, max_depth: int) -> list[int]:
        """The draft lines after line `i`, up to `max_depth` tokens."""
        out: list[int] = []
        for line in self.lines[i + 1:]:
            if len(out) >= max_depth:
                break
            out += line
        return out[:max_depth]


# Candidates kept per draft layout. Every proposed token is a row of the next forward, and
# most candidates past the first two are wrong: padoc_hsd without stage 1, 32 model pages,
# 16 in flight, keeping 1 / 2 / 3 / all: median steps 23 / 22 / 22 / 22, draft tokens
# verified 4980 / 7045 / 8881 / 12304 (n-gram layout matching: 30.5 steps, 5357 tokens).
CANDIDATES = 2


def layout_tree(own: list[int], drafts: list[LayoutLines], max_depth: int, max_nodes: int,
                candidates: int = CANDIDATES) -> DraftTree | None:
    """One draft tree from the first `candidates` line candidates of every draft layout."""
    return prefix_tree([c for d in drafts for c in d.candidates(own, max_depth)[:candidates]], max_nodes)
