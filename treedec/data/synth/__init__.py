"""Synthetic pages: seeded, rendered offline, with exact ground truth."""
from treedec.data.synth.generator import Sample, SynthConfig, generate_page, synth_config
from treedec.data.synth.presets import PRESETS

__all__ = ["PRESETS", "Sample", "SynthConfig", "generate_page", "synth_config"]
