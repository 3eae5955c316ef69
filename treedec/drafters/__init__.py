"""Token drafters for speculative decoding: n-gram matching against draft pages
(`ngram.py`, `page_drafts.py`) and the layout stream drafted line by line
(`layout_lines.py`). The draft pages themselves come from a page OCR pipeline:
`treedec.ocr`."""
