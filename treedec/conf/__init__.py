"""Hydra configs. Folders are config groups; dataclass schemas are registered here."""
from hydra.core.config_store import ConfigStore


def _unset(cls, name: str):
    """`cls` with every field optional and None (unset) by default: `data.page` knobs a user sets,
    typed and checked by Hydra, while unset ones fall back to the model's page distribution."""
    from dataclasses import fields, make_dataclass
    from typing import Any, Optional, get_origin, get_type_hints

    hints = get_type_hints(cls)
    # dict knobs are untyped here (OmegaConf cannot put a dict into a None typed-dict node);
    # the data set checks them when it builds the SynthConfig
    return make_dataclass(name, [(f.name, Any if get_origin(hints[f.name]) is dict else Optional[hints[f.name]], None)
                                 for f in fields(cls)])


def register_resolvers() -> None:
    """`${treedec_local:OUT}`: where a command writes for `out=OUT` (a URL's local mirror, treedec.run.remote)."""
    import os

    from omegaconf import OmegaConf

    from treedec.run.remote import is_url, mirror_of

    OmegaConf.register_new_resolver(
        "treedec_local", lambda out: str(mirror_of(out, os.environ.get("TREEDEC_RUNS", "runs"))) if is_url(out) else out,
        replace=True)


def register_schemas() -> None:
    from treedec.models.vlm import VLMSpec
    from treedec.runtimes.embedded import EmbeddedConfig
    from treedec.runtimes.vllm.engine import VLLMConfig
    from treedec.strategies.hsd import HSDOptions
    from treedec.strategies.mtp import MTPOptions
    from treedec.strategies.base import NoOptions
    from treedec.strategies.ptp import PTPOptions
    from treedec.training.trainer import TrainConfig

    register_data_schemas()
    cs = ConfigStore.instance()
    cs.store(group="schema", name="vlm_spec", node=VLMSpec)
    cs.store(group="schema", name="train", node=TrainConfig)
    cs.store(group="schema", name="runtime_embedded", node=EmbeddedConfig)  # the runtimes' defaults: their dataclasses
    cs.store(group="schema", name="runtime_vllm", node=VLLMConfig)
    cs.store(group="schema", name="strategy_hsd", node=HSDOptions)  # the drafting strategies' options: their
    cs.store(group="schema", name="strategy_mtp", node=MTPOptions)  # dataclasses (presets: padoc_hsd, hpd)
    cs.store(group="schema", name="strategy_ptp", node=PTPOptions)
    cs.store(group="schema", name="strategy_plain", node=NoOptions)  # sequential, padoc, crops: a name alone
    register_plugin_strategies()


def register_data_schemas() -> None:
    """The data sets' schemas only (what a command without a model, such as `draft`, needs)."""
    from treedec.data.synth import SynthConfig

    ConfigStore.instance().store(group="schema", name="synth_page", node=_unset(SynthConfig, "SynthPage"))


def plugin_strategies() -> list[str]:
    """Registered strategies without a YAML file here (plug-ins: top-level strategies/, entry points)."""
    from pathlib import Path

    from treedec.strategies.base import STRATEGIES

    files = {p.stem for p in (Path(__file__).parent / "strategy").glob("*.yaml")}
    return [n for n in STRATEGIES.names() if n not in files]


def register_plugin_strategies() -> None:
    """`strategy=NAME` for every plug-in: its config is its factory's schema (`plugin_schema`:
    its options typed, their defaults the factory's)."""
    from treedec.strategies.base import plugin_schema

    for name in plugin_strategies():
        ConfigStore.instance().store(group="strategy", name=name, node=plugin_schema(name))
