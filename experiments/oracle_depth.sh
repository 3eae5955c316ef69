#!/usr/bin/env bash
# Oracle (model-free) decoding depth: sequential vs one branch per layout region, on 500
# held-out synthetic pages of each page preset (base: SynthConfig's defaults; v2: calibrated to
# the real pages; v2_model: what model v2 reads) and on the 12 real OmniDocBench demo pages,
# then the page statistics of the real pages and the v2 presets side by side.
set -euo pipefail
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
$PY -m treedec depth data=synth data.pages=500 data.page.preset=base out=runs/depth-synth
$PY -m treedec depth data=synth data.pages=500 data.page.preset=base strategy=padoc_rows out=runs/depth-synth-rows
$PY -m treedec depth data=synth data.pages=500 data.page.preset=v2 out=runs/depth-synth-v2
$PY -m treedec depth data=synth data.pages=500 data.page.preset=v2_model out=runs/depth-synth-v2-model
$PY -m treedec depth data=omnidocbench data.root=../shared/omnidocbench_demo out=runs/depth-omnidocbench
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" $PY experiments/page_stats.py --pages 500 --json runs/page_stats.json
