"""Tiny random models and a forced-structure processor for engine tests."""
from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor

from treedec.models.adapter import Prompt
from treedec.tokenizer import Tokenizer

TOK = Tokenizer()
ANY = list(range(len(TOK)))


def tiny_llama(seed: int = 0, attn: str = "sdpa") -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(TOK), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=1024,
                      initializer_range=0.2, eos_token_id=TOK.eos_id, pad_token_id=TOK.pad_id, bos_token_id=TOK.bos_id)
    cfg._attn_implementation = attn
    return LlamaForCausalLM(cfg).eval()


def prompt(seed: int, n: int = 12) -> Prompt:
    g = torch.Generator().manual_seed(seed)
    chars = TOK.encode("abcdefghijklmnopqrstuvwxyz0123456789")
    return Prompt([TOK.bos_id] + [chars[i] for i in torch.randint(0, len(chars), (n,), generator=g)])


class ForcedTree(LogitsProcessor):
    """Makes a random model emit a page tree, as a function of the visible context only.

    Layout stream (no `<CHILD>` after the prompt): per block `<BLOCK> <|text_block|> d d d <FORK>`
    with d the model's own choice among digits, then `<eos>` after `blocks` blocks. Flat
    mode (`fork=False`): `<CHILD>` instead of `<FORK>`, then the content. Content (after a
    `<CHILD>`): the model's own choice among letters, `<eos>`/next block after
    `lengths[k]` tokens for block k. `boxes` (one text per block, e.g. "[62,62,938,375]"):
    block k's box written as given instead of `d d d`, so the output parses as a page. `tok`:
    the model's tokenizer (a VLM's has other ids than `TOK`). `category`: the category token
    after `<BLOCK>`; None for a format that writes the category as a word (HPD-Parsing's: then
    each of `boxes` is the whole head, e.g. "text [62,62,938,375]")."""

    def __init__(self, prompt_len: int, blocks: int, lengths: list[int], fork: bool = True,
                 boxes: list[str] | None = None, tok: Tokenizer = TOK, category: str | None = "<|text_block|>"):
        self.prompt_len, self.blocks, self.lengths, self.fork = prompt_len, blocks, lengths, fork
        self.tok, self.any = tok, list(range(len(tok)))
        v = tok.vocab
        self.digits = [v[c] for c in "0123456789"]
        self.letters = [v[c] for c in "abcdefghij"]
        self.cat = [[v[category]]] if category else []
        self.boxes = [[[t] for t in tok.encode(b)] for b in boxes] if boxes else None

    def _plan(self, gen: list[int]) -> list[int] | None:
        """The tokens allowed next, given the generated part of the visible context."""
        if self.tok.child_id in gen:  # inside content (a branch, or flat form's current block)
            k = sum(1 for t in gen if t == self.tok.block_id) - 1
            if not 0 <= k < len(self.lengths):
                return self.any  # off-plan context (a rejected draft node): anything goes
            since = len(gen) - 1 - max(i for i, t in enumerate(gen) if t == self.tok.child_id)
            if since < self.lengths[k]:
                return self.letters
            if self.fork:
                return [self.tok.eos_id]
            # flat form: the block is complete, continue with the next block's layout
        blocks_done = sum(1 for t in gen if t == self.tok.block_id)
        last_block = max((i for i, t in enumerate(gen) if t == self.tok.block_id), default=None)
        if last_block is None or (self.tok.fork_id if self.fork else self.tok.child_id) in gen[last_block:]:
            return [self.tok.block_id] if blocks_done < self.blocks else [self.tok.eos_id]
        if self.boxes and blocks_done > len(self.boxes):
            return self.any  # off-plan: a rejected draft node's extra block
        box = self.boxes[blocks_done - 1] if self.boxes else [self.digits] * 3
        plan = [*self.cat, *box, [self.tok.fork_id if self.fork else self.tok.child_id]]
        j = len(gen) - last_block
        return plan[j - 1] if j <= len(plan) else self.any

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        out = torch.full_like(scores, float("-inf"))
        for b in range(input_ids.shape[0]):
            allowed = self._plan(input_ids[b].tolist()[self.prompt_len:])
            out[b, allowed] = scores[b, allowed]
        return out


class ForcedRows(LogitsProcessor):
    """Nested structure for `padoc_rows`: the layout forks `blocks` branches; branch k emits
    `<table>` + `rows[k]` x (`<tr><FORK>`) + `</table>`; each row branch emits `row_len`
    letters then `</tr><eos>`. A function of the visible context only. `boxes`, `tok`: as
    `ForcedTree`'s. `cells` (for `table_cells`): each row is `<tr>` + `cells` x (`<td><FORK>`)
    + `</tr>` in the table branch, each cell branch `row_len` letters then `</td><eos>`."""

    def __init__(self, prompt_len: int, rows: list[int], row_len: int, boxes: list[str] | None = None,
                 tok: Tokenizer = TOK, cells: int = 0):
        self.prompt_len, self.rows, self.row_len, self.tok, self.cells = prompt_len, rows, row_len, tok, cells
        self.layout = ForcedTree(prompt_len, len(rows), [0] * len(rows), boxes=boxes, tok=tok)
        v = tok.vocab
        self.table, self.end_table, self.tr, self.end_tr = v["<table>"], v["</table>"], v["<tr>"], v["</tr>"]
        self.td, self.end_td = v["<td>"], v["</td>"]

    def _allowed(self, gen: list[int]) -> list[int]:
        tok = self.tok
        children = [i for i, t in enumerate(gen) if t == tok.child_id]
        if not children:
            return self.layout._plan(gen)
        k = sum(1 for t in gen[: children[0]] if t == tok.block_id) - 1
        if not 0 <= k < len(self.rows):
            return self.layout.any  # off-plan context (a rejected draft node): anything goes
        if len(children) == 1:  # table branch
            own = gen[children[0] + 1:]
            if not own:
                return [self.table]
            if own[-1] == self.end_table:
                return [tok.eos_id]
            if self.cells:
                return self._cells(own, self.rows[k])
            done_rows = own.count(tok.fork_id)
            if own[-1] == self.tr:
                return [tok.fork_id]
            return [self.tr] if done_rows < self.rows[k] else [self.end_table]
        own = gen[children[1] + 1:]  # row (cell) branch
        if len(own) < self.row_len:
            return self.layout.letters
        return [self.end_td if self.cells else self.end_tr] if len(own) == self.row_len else [tok.eos_id]

    def _cells(self, own: list[int], rows: int) -> list[int]:
        """The table branch's next token under `cells`: rows of `<td><FORK>` cells."""
        last = own[-1]
        if last == self.td:
            return [self.tok.fork_id]
        if last in (self.table, self.end_tr):
            return [self.tr] if own.count(self.end_tr) < rows else [self.end_table]
        if self.tr not in own:
            return self.layout.any  # off-plan context (a rejected draft node): anything goes
        since = own[max(i for i, t in enumerate(own) if t == self.tr):]  # this row so far
        return [self.td] if since.count(self.tok.fork_id) < self.cells else [self.end_tr]

    def __call__(self, input_ids, scores):
        out = torch.full_like(scores, float("-inf"))
        for b in range(input_ids.shape[0]):
            allowed = self._allowed(input_ids[b].tolist()[self.prompt_len:])
            out[b, allowed] = scores[b, allowed]
        return out


class OneAtATime:
    """A test's draft source that drafts one stream at a time (its `propose(graph, sid, sample,
    state)`): declared a source of trees on token ids alone, deaf to verdicts."""
    trees, needs_hidden, pages_ahead, depth, drafts_in_forward = True, False, False, 15, False

    def for_run(self, vlm):
        return self

    def propose_many(self, requests):
        return [self.propose(*r) for r in requests]

    def observe(self, graph, sid, sample, tree, verdict):
        pass
