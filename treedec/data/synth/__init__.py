"""Synthetic pages: seeded, rendered offline, with exact ground truth."""
from treedec.data.synth.generator import SynthConfig, SynthSample, generate_page, synth_config, synth_name
from treedec.data.synth.presets import PRESETS

__all__ = ["PRESETS", "SynthConfig", "SynthSample", "generate_page", "synth_config", "synth_name"]
