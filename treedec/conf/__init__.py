"""Hydra configs. Folders are config groups; dataclass schemas are registered here."""
from hydra.core.config_store import ConfigStore


def register_schemas() -> None:
    from treedec.data.synth import SynthConfig
    from treedec.models.vlm import VLMSpec
    from treedec.training.trainer import TrainConfig

    cs = ConfigStore.instance()
    cs.store(group="schema", name="synth_page", node=SynthConfig)
    cs.store(group="schema", name="vlm_spec", node=VLMSpec)
    cs.store(group="schema", name="train", node=TrainConfig)
