"""Output formats: how a page is written as a model's output and read back (one file a format,
registered by name; `treedec.formats.base` holds what a format is, `treedec.formats.contract` the
flat and tree forms every strategy shares and their tolerant parser)."""
from treedec.formats.base import FORMATS, MODES, Format, get_format, require, resolve_format, serving

__all__ = ["FORMATS", "MODES", "Format", "get_format", "require", "resolve_format", "serving"]
