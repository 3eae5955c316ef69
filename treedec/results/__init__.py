"""Figures computed from a run's pages and records, and where they are kept: speed (`speed.py`:
pages/s, latency, concurrency levels), quality (`quality.py`, scored by `evaluate.py` through
`treedec.metrics`), oracle depth (`depth.py`), the forward-pass cost model (`cost_model.py`), the
engine's self-check (`check.py`) and the results store that keys and keeps jobs' results for
resumable sweeps and `compare` (`store.py`). Nothing here is re-exported: import the module that
holds a name."""
