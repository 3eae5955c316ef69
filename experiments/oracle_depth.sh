#!/usr/bin/env bash
# Oracle (model-free) decoding depth: sequential vs one branch per layout region,
# on 500 held-out synthetic pages and on the 12 real OmniDocBench demo pages.
set -euo pipefail
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
$PY -m treedec depth data=synth data.pages=500 out=runs/depth-synth
$PY -m treedec depth data=synth data.pages=500 strategy=padoc_rows out=runs/depth-synth-rows
$PY -m treedec depth data=omnidocbench data.root=../shared/omnidocbench_demo out=runs/depth-omnidocbench
