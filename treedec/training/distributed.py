"""Data parallelism for fine-tuning a real backbone: the process group (torchrun's env),
DDP or FSDP (torch's `fully_shard`, FSDP2) around one module, and the full state dict back.

Both wrappers average gradients over ranks, so a caller scales each rank's loss sum by
world / global token count to get the one-process update (sum over all tokens / tokens).
"""
from __future__ import annotations

import os

import torch

from treedec.errors import UserError

PARALLEL = ("auto", "none", "ddp", "fsdp")


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def init(device: str) -> tuple[int, int, torch.device]:
    """(rank, world, this rank's device) under torchrun (nccl on CUDA, gloo on CPU), else (0, 1, device)."""
    world = world_size()
    name = "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)
    if name == "cuda" and world > 1:
        name = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    dev = torch.device(name)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world == 1:
        return 0, 1, dev
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), dev


def solo_group(device: torch.device) -> None:
    """A one-process group (FSDP outside torchrun: e.g. the recipe's smoke run, or one GPU)."""
    import tempfile

    import torch.distributed as dist

    if not dist.is_initialized():
        store = tempfile.NamedTemporaryFile(prefix="treedec-pg-", delete=False).name
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{store}",
                                rank=0, world_size=1)


def resolve(parallel: str, world: int) -> str:
    if parallel not in PARALLEL:
        raise UserError(f"parallel must be one of {', '.join(PARALLEL)}, got {parallel!r}")
    if parallel == "auto":
        return "ddp" if world > 1 else "none"
    if parallel == "ddp" and world == 1:
        return "none"
    return parallel


def wrap(module: torch.nn.Module, kind: str, device: torch.device, units: list[torch.nn.Module]) -> torch.nn.Module:
    """`module` for data parallelism: as is (`none`), in DDP, or fully sharded (`fsdp`: each of
    `units`, e.g. the decoder layers and vision blocks, is its own FSDP unit, then the whole)."""
    if kind == "none":
        return module
    if kind == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)
    from torch.distributed.fsdp import fully_shard

    for unit in units:
        fully_shard(unit)
    fully_shard(module)
    return module


def all_sum(values: list[float], device: torch.device, world: int) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(t)
    return t.tolist()


def all_max(value: int, device: torch.device, world: int) -> int:
    t = torch.tensor([value], dtype=torch.long, device=device)
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t[0])


def average_grads(params, world: int) -> None:
    """Average over the ranks the gradients of parameters no DDP wrapper sees, as DDP does."""
    if world > 1:
        import torch.distributed as dist

        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= world


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The module inside a DDP wrapper (FSDP shards in place: returned as is)."""
    return module.module if isinstance(module, torch.nn.parallel.DistributedDataParallel) else module


def close(world: int) -> None:
    """Wait for every rank, end the process group, then collect garbage. Callers drop their DDP
    wrappers first (`unwrap`): a wrapper's reducer keeps the group and its gloo threads alive
    past `destroy_process_group`, to be freed while the interpreter shuts down, where a gloo
    thread can abort the process ("terminate called without an active exception"). The
    collection frees a dropped wrapper held in reference cycles (Qwen3-VL's under DDP: without
    it rank 1 still had its gloo threads at exit), so that the group goes now."""
    import gc

    import torch.distributed as dist

    if dist.is_initialized():  # (FSDP's one-process group too)
        if world > 1:
            dist.barrier()
        dist.destroy_process_group()
    gc.collect()


def full_state_dict(module: torch.nn.Module, kind: str) -> dict[str, torch.Tensor]:
    """The unsharded state dict on the CPU (a collective under FSDP: every rank calls it)."""
    if kind == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k: v.detach().cpu() for k, v in module.state_dict().items()}


def full_optimizer_state(module: torch.nn.Module, opt: torch.optim.Optimizer, kind: str) -> dict:
    """The optimizer's state, unsharded on the CPU and keyed by parameter name (a collective
    under FSDP: every rank calls it), so that a run resumes with any number of processes."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(module, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=kind == "fsdp"))


def load_optimizer_state(module: torch.nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
    """`full_optimizer_state`'s output back into `opt` (every rank passes the whole state)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(module, opt, state, options=StateDictOptions(full_state_dict=True))
