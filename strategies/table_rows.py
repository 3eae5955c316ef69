"""One nested branch per table row: a table branch writes `<tr><FORK>` and the row's own
branch `<CHILD>cells</tr><eos>` decodes that row while the table branch goes on to the next
(PaDoc plus nested forks). A table's depth drops from its length to skeleton + longest row.
`strategy=table_rows`; `padoc_rows`, the rule's earlier name, still works."""
from treedec.api import Tokenizer, fork_rule


@fork_rule("table_rows", "padoc_rows")
def table_rows(tokens: list[int], tok: Tokenizer) -> list[tuple[int, int]]:
    """From after each `<tr>` to its `</tr>` included."""
    tr, end = tok.vocab["<tr>"], tok.vocab["</tr>"]
    spans, i = [], 0
    while tr in tokens[i:]:
        start = tokens.index(tr, i) + 1
        if end not in tokens[start:]:
            break
        i = tokens.index(end, start) + 1
        spans.append((start, i))
    return spans
