#!/usr/bin/env bash
# Oracle (model-free) decoding depth: sequential vs one branch per layout region,
# on 500 held-out synthetic pages and on the 12 real OmniDocBench demo pages.
set -euo pipefail
python -m treedec depth data=synth data.pages=500 out=runs/depth-synth
python -m treedec depth data=omnidocbench data.root=../shared/omnidocbench_demo out=runs/depth-omnidocbench
