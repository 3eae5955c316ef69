#!/usr/bin/env bash
# The wheels the GPU machine lacks for `python -m treedec train` (its image: Python 3.12, torch
# 2.11 + CUDA, transformers 5.17, tokenizers, safetensors, numpy, pillow, matplotlib, tqdm, rich;
# no Hydra, OmegaConf, Levenshtein or apted: .library/device/KINDS.md), downloaded here into .whl/
# (ignored: .gitignore) at the versions this venv runs, transformers included, so
# the machine trains with the code tested here. Carry .whl in the device call
# (experiments/device_train_v2.sh installs them first). About 15 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
rm -rf .whl && mkdir -p .whl
pins=$($PY - <<'PYEOF'
from importlib.metadata import version
print(" ".join(f"{n}=={version(n)}" for n in ("transformers", "hydra-core", "omegaconf", "levenshtein", "rapidfuzz", "apted",
                                              "antlr4-python3-runtime")))
PYEOF
)
antlr=${pins##* }; pins=${pins% *}  # the last pin: built below, not downloaded
echo "device_wheels: $pins"
# shellcheck disable=SC2086
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $pins
# OmegaConf's parser runtime exists as a source release only: a pure-Python wheel built here
$PY -m pip wheel -q --no-deps "$antlr" -w .whl
ls -1 .whl && du -sh .whl
