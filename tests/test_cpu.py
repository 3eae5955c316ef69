"""The machine a figure was measured on (`treedec.cpu`): its CPU in every summary.json, and
`compare` warning when the runs it sets side by side came from different CPUs."""
from treedec.commands.compare import mismatch
from treedec.cpu import KINDS, cpu_info, describe, kind_of


def test_cpu_info_names_the_model_the_flags_and_the_cores():
    info = cpu_info()
    assert info["model"] and info["cores"] >= 1 and info["kind"] in KINDS
    assert set(info["flags"]) <= {"fma", "avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16",
                                  "amx_tile", "amx_int8"}
    assert info["kind"] == kind_of(info["flags"]) and str(info["cores"]) in describe(info)


def test_kinds_go_by_what_the_kernels_need():
    assert kind_of(["fma", "avx2", "avx512f", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8"]) == "amx"
    assert kind_of(["fma", "avx2", "avx512f", "avx512_vnni"]) == "vnni"
    assert kind_of(["fma", "avx2", "avx_vnni"]) == "vnni"  # Alder Lake and later client parts
    assert kind_of(["fma", "avx2"]) == "avx2" and kind_of(["fma", "avx2", "avx512f"]) == "avx2"  # AVX-512 without VNNI
    assert kind_of([]) == "other"


def _job(cpu):
    return {"sweep": "s", "params": {"strategy": "hsd"}, "pages": 12, "seeds": "None/None", "weights": None,
            "cpu": describe(cpu) if cpu else None}


def test_compare_warns_when_runs_came_from_different_cpus():
    amx = {"model": "Intel Xeon", "flags": [], "cores": 2, "kind": "amx"}
    epyc = {"model": "AMD EPYC 7B12", "flags": ["fma", "avx2"], "cores": 2, "kind": "avx2"}
    assert mismatch([_job(amx), _job(amx)]) is None
    assert mismatch([_job(amx), _job(None)]) is None  # a run from before meta.cpu: nothing to say
    warning = mismatch([_job(amx), _job(epyc)])
    assert "CPU" in warning and "AMD EPYC 7B12 (avx2, 2 cores)" in warning and "Intel Xeon (amx" in warning
