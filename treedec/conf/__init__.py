"""Hydra configs. Folders are config groups; dataclass schemas are registered here."""
from hydra.core.config_store import ConfigStore


def register_schemas() -> None:
    from treedec.data.synth import SynthConfig

    ConfigStore.instance().store(group="schema", name="synth_page", node=SynthConfig)
