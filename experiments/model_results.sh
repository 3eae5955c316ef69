#!/usr/bin/env bash
# The shipped tiny model's figures (README "Results"): quality of sequential and padoc on
# held-out pages of its training distribution; the embedded engine at concurrency 1/4/16/64
# (steps, pages/s, P95, one stream vs plain decoding); sequential/padoc/hsd/padoc_hsd in one
# run; the pipeline drafter's quality on the same page distribution. About 30 minutes on 2 cores.
set -euo pipefail
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
PAGES=${PAGES:-100}
$PY -m treedec run strategy=padoc compare=sequential data.pages=$PAGES out=runs/model-quality
$PY experiments/bench_engine.py --pages 32 --concurrency 1 4 16 64 --strategies sequential padoc --out runs/bench_engine
$PY experiments/draft_quality.py --model shipped --pages 32 --no-real --out runs/draft_quality_model.json
$PY experiments/bench_engine.py --pages 32 --concurrency 16 --strategies sequential padoc hsd padoc_hsd hsd:drafts=oracle padoc_hsd:drafts=oracle --out runs/bench_hsd
