"""Training batches made ahead of the step in worker processes (`train.loader_workers`).

A step's batch is a pure function of the step number (`Trainer.batch`: page seeds from the
run seed and the step), so worker processes can make steps start..stop-1 in order while the
model trains on an earlier one, and the run is the same as with batches made in-process.
On a GPU this matters: making a step's pages can take as long as several optimizer steps
there (docs/results.md, model v2). Workers are forked, so they share the trainer's
tokenizer, strategies and configs without pickling; they never touch the model's device.
"""
from __future__ import annotations

from typing import Callable, Iterator

from torch.utils.data import DataLoader, Dataset


class StepBatches(Dataset):
    """Item i: `make(start + i)`."""

    def __init__(self, make: Callable[[int], tuple], start: int, stop: int):
        self.make, self.start, self.stop = make, start, stop

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __getitem__(self, i: int):
        return self.make(self.start + i)


def _as_made(batch):
    return batch  # no collation: a batch is one step's packed examples already


def step_batches(make: Callable[[int], tuple], start: int, stop: int, workers: int) -> Iterator[tuple]:
    """The batches of steps start..stop-1, in order: made here (workers=0) or `workers` forked
    processes ahead of the consumer (two batches queued per worker; torch gives each worker one thread)."""
    if workers <= 0:
        return (make(step) for step in range(start, stop))
    loader = DataLoader(StepBatches(make, start, stop), batch_size=None, shuffle=False, num_workers=workers,
                        prefetch_factor=2, multiprocessing_context="fork",
                        collate_fn=_as_made)
    return iter(loader)
