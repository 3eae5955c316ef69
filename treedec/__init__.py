"""treedec: tree-structured decoding of document-parsing vision-language models."""
__version__ = "0.1.0"
