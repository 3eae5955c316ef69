"""One nested branch per table cell: the table branch writes the skeleton (`<tr><td><FORK>...`)
and each cell's branch `<CHILD>text</td><eos>` decodes that cell's text. A table's depth drops
to skeleton + longest cell. `strategy=table_cells`."""
from treedec.api import Tokenizer, fork_rule


@fork_rule("table_cells")
def table_cells(tokens: list[int], tok: Tokenizer) -> list[tuple[int, int]]:
    """From after each cell's opening tag (`<td>`, or `<td` ... `>`) to its `</td>` included."""
    v = tok.vocab
    whole, partial, close = {v["<td>"], v["<th>"]}, {v["<td"], v["<th"]}, {v["</td>"], v["</th>"]}
    spans, start, in_tag = [], None, False
    for i, t in enumerate(tokens):
        if t in whole or (in_tag and t == v[">"]):
            start, in_tag = i + 1, False
        elif t in partial:
            in_tag = True
        elif t in close and start is not None:
            spans.append((start, i + 1))
            start = None
    return spans
