"""runtime=vllm: a strategy's pages on stock vLLM, every stream a request (`runtime.py`:
`VLLMRuntime`, the runtime contract), built from its parts: the config, serving folder and shared
engine (`engine.py`), streams as requests (`runner.py`), the prompts' ids (`prompts.py`), which
drafting strategies run and where they differ (`hsd.py`), the page-draft `custom_class` proposer
(`drafts.py`), an MTP head as a Medusa draft model (`mtp.py`) and the mends that make vLLM decode
as transformers does (`compat.py`); treedec/runtimes/README.md says what stock vLLM cannot do and
what this runtime does instead. Nothing here is re-exported: import the module that holds a name
(`import vllm` in these modules is the vLLM library, never this package)."""
