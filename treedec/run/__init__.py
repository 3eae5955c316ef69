"""A run of pages, from its config to its folder: one pass of a strategy over the pages
(`passes.py`), the runtimes' shared per-page bookkeeping (`parse_pages.py`) and where the wall time
went (`phases.py`), a strategy's work around its decode as runs of their own (`stages/`), the run's
folder (`outputs.py`: summary.json, pages/, config.yaml), its summary's figures (`summary.py`), a
run that resumes from the pages an earlier sitting finished (`resume.py`) and `out=` as a
filesystem URL (`remote.py`). Nothing here is re-exported: import the module that holds a name."""
