"""Runtimes other than the embedded engine (`treedec.engine`): each parses pages with a
strategy and returns the same `treedec.runner.RunResult` as `parse_pages`.

- `treedec.runtimes.vllm`: the request-level realization on stock vLLM (optional extra
  `pip install -e .[vllm]`, or `scripts/install_vllm.sh`); see README.md here. Its parts:
  `vllm_engine` (config, serving folder, the shared engine), `vllm_runner` (streams as
  requests), `vllm_hsd` (which drafting strategies run, their drafts written for the proposer).
- `treedec.runtimes.vllm_drafts`: the `custom_class` speculative proposer through which
  `hsd` / `padoc_hsd` page drafts reach vLLM (linear chains), and its draft store.
"""
