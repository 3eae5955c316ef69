"""A data set cut to some of its pages, by name, without reading the others' images: what a
worker reads when the pages of one data set are shared out (`treedec.cluster`). Each kind is
cut where its pages are listed (a folder's plan, an OmniDocBench JSON's pages, a synthetic
set's seeds), so the pages read are the ones a whole pass would read, byte for byte."""
from __future__ import annotations

import copy
from typing import Iterable, Iterator

from treedec.data import FilesDataset, OmniDocBenchDataset, SynthDataset
from treedec.data.synth import generate_page, synth_name


class SynthPages:
    """Some pages of a synthetic set, by their seeds' offsets (`SynthDataset` pages i)."""

    def __init__(self, whole: SynthDataset, offsets: list[int]):
        self.whole, self.offsets = whole, offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator:
        for i in self.offsets:
            yield generate_page(self.whole.seed + i, self.whole.config, render=self.whole.render)


def pages_named(samples, names: Iterable[str]):
    """The pages of `samples` named in `names`, in the data set's order, read as it reads them.
    A data set of another kind is read whole and filtered (its skipped pages read too)."""
    from treedec.run.resume import Remaining

    wanted = set(names)
    while isinstance(samples, Remaining):  # a resumed sitting's pages: cut the data set under it
        samples = samples.samples
    if isinstance(samples, FilesDataset):
        cut = copy.copy(samples)
        cut.plan = [p for p in samples.plan if p.name in wanted]
        return cut
    if isinstance(samples, OmniDocBenchDataset):
        cut = copy.copy(samples)
        cut.pages = [p for p in samples.pages if p.name in wanted]
        return cut
    if isinstance(samples, SynthDataset):
        return SynthPages(samples, [i for i in range(samples.pages) if synth_name(samples.seed + i) in wanted])
    return [s for s in samples if s.name in wanted]
