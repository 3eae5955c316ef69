"""Draft sources for speculative decoding, one protocol (`treedec.engine.draft.DraftSource`,
its capabilities declared fields: README.md beside this file): n-gram matching against
draft pages (`ngram.py`, `page_drafts.py`), the layout stream drafted line by line
(`layout_lines.py`), HPD's MTP head (`mtp.py`). The draft pages themselves come from a
page OCR pipeline: `treedec.ocr`."""
