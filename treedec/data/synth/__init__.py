"""Synthetic pages: seeded, rendered offline, with exact ground truth."""
from treedec.data.synth.generator import Sample, SynthConfig, generate_page

__all__ = ["Sample", "SynthConfig", "generate_page"]
