"""One Markdown file per input document (a PDF): its pages' Markdown in page order, each
under a comment naming the page, a page that was not decoded saying why."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from treedec.io.markdown import page_to_markdown
from treedec.page import Page


def document_markdown(pages: Sequence[tuple[str, Page | None, Sequence[str]]]) -> str:
    """`pages`: (page name, parsed page or None, flags) in page order."""
    parts = []
    for name, page, flags in pages:
        unread = [f for f in flags if f.startswith("unreadable")]
        if page is None or unread:
            why = "; ".join(unread or flags) or "not decoded"
            parts.append(f"<!-- page {name}: {why} -->\n")
        else:
            parts.append(f"<!-- page {name} -->\n\n{page_to_markdown(page)}")
    return "\n".join(parts)


def write_documents(folder: str | Path, documents: Mapping[str, Sequence[str]], records: Mapping) -> list[Path]:
    """`documents`: document name -> its page names in order; `records`: page name -> a
    record with `.page` and `.flags` (pages not in `records` were not reached: said so)."""
    folder = Path(folder)
    written = []
    for doc, names in documents.items():
        pages = [(n, records[n].page, records[n].flags) if n in records else (n, None, ["not reached (run stopped)"])
                 for n in names]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{doc}.md"
        path.write_text(document_markdown(pages), encoding="utf-8")
        written.append(path)
    return written
