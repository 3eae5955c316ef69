"""Reading and writing pages: OmniDocBench JSON and Markdown."""
from treedec.io.markdown import page_to_markdown
from treedec.io.omnidocbench import load_omnidocbench, page_from_omnidocbench, page_to_omnidocbench, save_omnidocbench

__all__ = ["load_omnidocbench", "save_omnidocbench", "page_from_omnidocbench", "page_to_omnidocbench", "page_to_markdown"]
