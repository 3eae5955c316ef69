"""Runtimes: what decodes a strategy's pages. One contract (`treedec.runtimes.base.Runtime`),
one copy of the per-page bookkeeping (`treedec.run.parse_pages.parse_pages`), chosen by config
(`runtime=embedded|vllm`: `treedec.runtimes.select.make_runtime`); each returns the same
`treedec.records.RunResult`.

- `embedded` (`treedec.runtimes.embedded.EmbeddedRuntime`): treedec's engine (`treedec.engine`).
- `vllm` (`treedec.runtimes.vllm.runtime.VLLMRuntime`): the request-level realization on stock vLLM
  (optional extra `pip install -e .[vllm]`, or `scripts/install_vllm.sh`); see README.md
  here. Its parts: `vllm.engine` (config, serving folder, the shared engine), `vllm.runner`
  (streams as requests), `vllm.hsd` (which drafting strategies run, where they run
  differently, their drafts written for the proposer), `vllm.drafts` (the `custom_class`
  speculative proposer through which `hsd` / `padoc_hsd` page drafts reach vLLM, as linear
  chains, and its draft store).
"""
