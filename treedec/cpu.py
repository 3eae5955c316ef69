"""The machine a figure was measured on: the CPU's model, the instruction sets that decide which
kernels ONNX Runtime, OpenVINO, oneDNN and numpy run, and the cores this process may use.

    cpu_info()  -> {"model": "AMD EPYC 7B12", "flags": ["avx2", "fma"], "cores": 2, "kind": "avx2"}

The flags are read with the CPUID instruction itself, as those libraries read them, not from
/proc/cpuinfo (which shows the CPU's, not what a process is told: under
`scripts/cpuid_mask` the two differ); where CPUID cannot be run here (not x86-64, or no
executable memory) they come from /proc/cpuinfo, and `masked_from` names the kind /proc/cpuinfo
gives where it lists more than CPUID tells this process. `kind` names the class the drafter's `auto`
choice and the docs' CPU figures go by:

- `amx`: Intel AMX (bfloat16 and int8 tile units: Xeon Sapphire Rapids and later);
- `vnni`: int8 dot products without saturation (AVX512-VNNI or AVX-VNNI), no AMX;
- `avx2`: AVX2 and FMA alone (AMD EPYC Zen 2, Intel Haswell-Skylake client parts);
- `other`: none of these (not x86-64, or older).

Every `summary.json` carries it as `meta.cpu`, and `compare` warns when runs it sets side by
side came from different CPUs.
"""
from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

# (leaf, subleaf, register, bit) -> the name /proc/cpuinfo gives the flag
FLAGS = {
    "fma": (1, 0, 2, 12),
    "avx2": (7, 0, 1, 5),
    "avx512f": (7, 0, 1, 16),
    "avx512_vnni": (7, 0, 2, 11),
    "avx_vnni": (7, 1, 0, 4),
    "avx512_bf16": (7, 1, 0, 5),
    "amx_bf16": (7, 0, 3, 22),
    "amx_tile": (7, 0, 3, 24),
    "amx_int8": (7, 0, 3, 25),
}
KINDS = ("amx", "vnni", "avx2", "other")

# x86-64 SysV: cpuid(leaf=edi, subleaf=esi, out=rdx) writes eax, ebx, ecx, edx to out[0..3]
_CPUID_CODE = bytes([
    0x53,                    # push rbx (callee-saved; cpuid writes it)
    0x89, 0xF8,              # mov eax, edi
    0x89, 0xF1,              # mov ecx, esi
    0x49, 0x89, 0xD0,        # mov r8, rdx
    0x0F, 0xA2,              # cpuid
    0x41, 0x89, 0x00,        # mov [r8], eax
    0x41, 0x89, 0x58, 0x04,  # mov [r8+4], ebx
    0x41, 0x89, 0x48, 0x08,  # mov [r8+8], ecx
    0x41, 0x89, 0x50, 0x0C,  # mov [r8+12], edx
    0x5B,                    # pop rbx
    0xC3,                    # ret
])


def _cpuid_flags() -> list[str] | None:
    """The FLAGS the CPUID instruction reports to this process, or None where it cannot run."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    import ctypes
    import mmap

    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError, ValueError):  # W+X refused (hardened kernels), or no mmap.PROT_EXEC
        return None
    page.write(_CPUID_CODE)
    regs = (ctypes.c_uint32 * 4)()
    cpuid = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p)(
        ctypes.addressof(ctypes.c_char.from_buffer(page)))

    def call(leaf: int, sub: int) -> tuple[int, ...]:
        cpuid(leaf, sub, ctypes.addressof(regs))
        return tuple(regs)

    top = call(0, 0)[0]
    seven_subs = call(7, 0)[0] if top >= 7 else -1
    found = []
    for name, (leaf, sub, reg, bit) in FLAGS.items():
        if leaf > top or (leaf == 7 and sub > seven_subs):
            continue
        if call(leaf, sub)[reg] >> bit & 1:
            found.append(name)
    del cpuid
    return found


def _proc_cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def kind_of(flags: list[str] | set[str]) -> str:
    """The CPU class (`KINDS`) of a set of flags."""
    flags = set(flags)
    if {"amx_tile", "amx_bf16"} <= flags:
        return "amx"
    if flags & {"avx512_vnni", "avx_vnni"}:
        return "vnni"
    if {"avx2", "fma"} <= flags:
        return "avx2"
    return "other"


@functools.cache
def cpu_info() -> dict:
    """{model, flags, cores, kind} of this process's CPU (see the module docstring)."""
    proc = _proc_cpuinfo()
    flags = _cpuid_flags()
    if flags is None:
        listed = set(proc.get("flags", proc.get("Features", "")).split())
        flags = [f for f in FLAGS if f in listed]
    model = proc.get("model name") or proc.get("Model") or platform.processor() or platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    info = {"model": model, "flags": flags, "cores": cores, "kind": kind_of(flags)}
    listed = [f for f in FLAGS if f in set(proc.get("flags", "").split())]
    if set(listed) - set(flags):  # the CPU has more than this process is told: scripts/cpuid_mask
        info["masked_from"] = kind_of(listed)
    return info


def describe(info: dict | None = None) -> str:
    """One line naming a CPU, for a docs figure or a warning: 'Intel Xeon ... (amx, 2 cores)'."""
    info = info or cpu_info()
    masked = f" masked from {info['masked_from']}" if info.get("masked_from") else ""
    return f"{info.get('model', '?')} ({info.get('kind', '?')}{masked}, {info.get('cores', '?')} cores)"
