"""HPD's MTP drafts on the vLLM runtime, through vLLM's own Medusa route.

vLLM 0.32's `custom_class` proposer gets token ids only, but its `medusa` method hands the
draft model the target's hidden states: `MedusaProposer.propose(target_hidden_states)`
(vllm/v1/spec_decode/medusa.py) with, per request, the last-layer hidden state (the LM
head's input) of the position whose logits gave the request's last sampled token
(vllm/v1/worker/gpu_model_runner.py, `propose_draft_token_ids`, method "medusa"). That is
what our head drafts from (`MTPDraftModel.chain(hidden, last)`), except `last`, the sampled
token itself: under greedy decoding it is the argmax of the LM head on that hidden state,
so the draft model recomputes it. The CPU model runner inherits the GPU runner's drafters
(vllm/v1/worker/cpu_model_runner.py: "speculative decoding is now supported on CPU").

So the head is served as a Medusa draft model: `MTPHeadForVLLM` (registered with vLLM's
`ModelRegistry` under `ARCH`) reads a folder (`draft_dir`) holding a Medusa config
(`model_type: medusa`, `num_heads` = K, which vLLM sets to `num_speculative_tokens`) and
the head's weights with the base model's embedding and LM head; its forward returns K
logits rows, depth by depth, each depth fed the previous depth's argmax, as the embedded
drafter's chain; `MedusaProposer` proposes their argmax. vLLM verifies the chain exactly
(greedy): the pages are the base strategy's.

Registration is in this process: the backend's engine core runs here
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`); tensor-parallel workers (other processes) would not
know the architecture, so `mtp_refusal` refuses them.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from treedec.models.mtp_head import MTPConfig, MTPDraftModel, MTPHead

ARCH = "TreedecMTPHead"


class MTPHeadForVLLM(nn.Module):
    """The MTP head as a vLLM Medusa draft model: hidden states [N, H] -> K logits [N, V]."""

    def __init__(self, *, vllm_config, prefix: str = ""):
        super().__init__()
        cfg = vllm_config.speculative_config.draft_model_config.hf_config
        self.k = int(cfg.num_heads)  # vLLM sets it to num_speculative_tokens
        self.head = MTPHead(MTPConfig(cfg.hidden_size, cfg.intermediate_size, self.k, cfg.rms_norm_eps))
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        # built once: it holds these very modules, so vLLM's later moves and weight loads reach it
        self.draft = MTPDraftModel(self.head, self.embed, self.lm_head)

    def forward(self, hidden_states: torch.Tensor) -> list[torch.Tensor]:
        h = hidden_states.to(self.lm_head.weight.dtype)
        prev = self.lm_head(h).argmax(-1)  # the token the target sampled from h (greedy)
        return self.draft.greedy_logits(h, prev, self.k)

    def compute_logits(self, logits: list[torch.Tensor]) -> list[torch.Tensor]:
        return logits

    def load_weights(self, weights) -> set[str]:
        params = dict(self.named_parameters())
        loaded = set()
        for name, w in weights:
            params[name].data.copy_(w)
            loaded.add(name)
        return loaded


def register() -> None:
    from vllm import ModelRegistry

    if ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCH, MTPHeadForVLLM)


def draft_dir(vlm, source, k: int, engines) -> Path:
    """A folder vLLM loads the head of `source` (a draft source on the hidden state: its
    `head(vlm)`, `head_folder(vlm)`) from as a Medusa draft model with K depths: config.json +
    model.safetensors (head, base embedding, base LM head, float32). One folder per model,
    head folder and K, kept by the runtime's `engines` (`VLLMEngines`: it is in the engine's
    key, so strategies with the same head share an engine)."""
    folder = source.head_folder(vlm)
    key = (str(Path(folder).resolve()) if folder else None, k)
    return engines.folder(vlm, key, lambda: _write_draft_dir(engines.scratch("treedec-vllm-mtp-"), vlm, source, k))


def _write_draft_dir(d: Path, vlm, source, k: int) -> Path:
    from safetensors.torch import save_file

    model = source.head(vlm)  # refuses in one line: no head, a head trained on other weights or for fewer depths
    c = model.head.cfg
    vocab, hidden = model.lm_head.weight.shape
    (d / "config.json").write_text(json.dumps({
        "model_type": "medusa", "architectures": [ARCH], "hidden_size": hidden, "vocab_size": vocab,
        "num_heads": k, "num_hidden_layers": 1, "intermediate_size": c.intermediate, "rms_norm_eps": c.eps,
        "trained_depths": c.k}, indent=1))
    weights = {f"head.{n}": t for n, t in model.head.state_dict().items()}
    weights["embed.weight"] = model.embed.weight
    weights["lm_head.weight"] = model.lm_head.weight
    save_file({n: t.detach().float().contiguous() for n, t in weights.items()}, str(d / "model.safetensors"))
    return d


# ---------------------------------------------------------------------- the runtime's side
def mtp_refusal(strategy, cfg) -> str | None:
    """Why this strategy, drafting on the hidden state alone, cannot run on vLLM (one line),
    None when it can."""
    name, see = repr(strategy.name), "run it with runtime=embedded (see treedec/runtimes/README.md)"
    if strategy.drafter.trees:
        return (f"strategy {name} drafts a tree (several first tokens), vLLM verifies one chain per request: "
                f"use strategy.top=1 or {see}")
    if cfg.speculative_config and not _ours(cfg.speculative_config):
        return (f"strategy {name} drafts through vLLM's medusa method with treedec's MTP head on runtime=vllm: "
                "leave runtime.speculative_config unset (num_speculative_tokens = strategy.k)")
    if cfg.tensor_parallel_size > 1 or cfg.data_parallel_size > 1:
        return (f"strategy {name} runs on one in-process vLLM engine (tensor_parallel_size = data_parallel_size = 1): "
                "the MTP head's model class is registered with vLLM in this process only")
    return None


def _ours(spec) -> bool:
    """`spec` is the speculative config `mtp_engine_cfg` made: its model a folder of `draft_dir`'s."""
    config = Path(str(dict(spec).get("model"))) / "config.json"
    return config.is_file() and json.loads(config.read_text()).get("architectures") == [ARCH]


def mtp_notes(strategy) -> list[str]:
    """Where an MTP strategy runs differently on vLLM, one line each."""
    n = strategy.name
    return [f"{n}: MTP drafts through vLLM's medusa method (the head as a Medusa draft model on the target's "
            "hidden states); the sampled token it continues is recomputed as the LM head's argmax (greedy)",
            f"{n}: a chain is not cut after <eos> as the embedded drafter cuts it (vLLM drops what follows a stop)"]


def mtp_engine_cfg(strategy, cfg, vlm, engines):
    """`cfg` with the strategy's head (bound to `vlm`: refused in one line when trained on other
    weights; its folder kept by `engines`) as vLLM's Medusa draft model, K = strategy.k,
    per-request draft counts reported."""
    from dataclasses import replace

    d = strategy.drafter
    register()
    spec = {"method": "medusa", "model": str(draft_dir(vlm, d, d.depth, engines)),
            "num_speculative_tokens": int(d.depth)}
    args = {"per_request_spec_decode_metrics": "detailed", **dict(cfg.engine_args)}
    # vllm/config/speculative.py:1320 reads the target's `hf_config.vocab_size` for a medusa
    # draft; a VLM's config keeps it in text_config: copied to the top (vLLM's Idefics3 reads
    # text_config's)
    vocab = vlm.model.config.get_text_config().vocab_size
    args["hf_overrides"] = {"vocab_size": vocab, **dict(args.get("hf_overrides") or {})}
    return replace(cfg, speculative_config=spec, engine_args=args)
