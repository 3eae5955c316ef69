#!/usr/bin/env bash
# The shipped tiny model's figures (docs/results.md): quality of sequential and padoc on
# held-out pages of its training distribution; the embedded engine at concurrency 1/4/16/64
# (steps, pages/s, P95, one stream vs plain decoding); sequential/padoc/hsd/padoc_hsd in one
# run; the pipeline drafter's quality on the same page distribution; HSD stage 1's crop reading. About 2h30
# on a quiet 2-core machine (the two bench_latency runs: 1h50; every strategy at every level drafts its pages).
# Every speed figure is end to end from a cold draft cache (load, draft, stage 1, decode, write: phases_s);
# the runs with --warm-drafts (after a run that fills the cache) are the precomputed-drafts figures, labelled so.
set -euo pipefail
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
PAGES=${PAGES:-100}
$PY -m treedec run strategy=padoc compare=sequential data.pages=$PAGES out=runs/model-quality
$PY -m treedec run strategy=padoc compare=sequential data.pages=500 out=runs/model-quality-500  # the same, 500 pages (less noise)
# every strategy at 1/4/16/64 in flight, 128 pages (38 + 70 min on a quiet 2-core machine)
$PY experiments/bench_latency.py --pages 128 --strategies sequential padoc table_rows crops mtp hpd --out runs/bench_latency
$PY experiments/bench_latency.py --pages 128 --strategies sequential hsd:draft_workers=2 padoc_hsd:draft_workers=2 --out runs/bench_latency_hsd
$PY experiments/draft_quality.py --model shipped --pages 32 --no-real --out runs/draft_quality_model.json
$PY experiments/stage1_quality.py --model shipped --pages 32 --out runs/stage1_quality.json
# HSD at 16 in flight: the headline rows end to end (cold), then every row with precomputed drafts (labelled)
$PY experiments/bench_engine.py --pages 32 --concurrency 16 --strategies sequential padoc hsd padoc_hsd \
  hsd:stage1=false padoc_hsd:stage1=false --out runs/bench_hsd_cold
$PY experiments/bench_engine.py --pages 32 --concurrency 16 --strategies sequential padoc_hsd --warm-drafts --out runs/bench_hsd_fill
$PY experiments/bench_engine.py --pages 32 --concurrency 16 --strategies sequential padoc hsd padoc_hsd hsd:stage1=false \
  padoc_hsd:stage1=false padoc_hsd:stage1=false,draft_len=adaptive padoc_hsd:stage1=false,layout=ngram \
  padoc_hsd:stage1=false,fuzzy=0 padoc_hsd:stage1=false,snap=false hsd:stage2_drafts=stage1,fuzzy=0 \
  hsd:drafts=oracle padoc_hsd:drafts=oracle padoc_hsd:drafts=oracle,stage1=false --warm-drafts --out runs/bench_hsd_warm
# the oracle (model-free) depth of the same page distribution, for the steps ratio's ceiling
$PY -m treedec depth data.pages=$PAGES data.page.width=256 data.page.height=256 'data.page.cell=[16,16]' data.page.margin=1 \
  'data.page.regions=[1,4]' data.page.text_mode=mixed 'data.page.para_words=[1,10]' data.page.wrap=hard \
  'data.page.kinds={text_block:0.5,title:0.2,table:0.12,equation_isolated:0.08,figure:0.1}' \
  'data.page.table_rows=[2,3]' 'data.page.table_cols=[2,3]' data.page.furniture_prob=0.4 out=runs/depth-model-pages
$PY experiments/bench_engine.py --pages 16 --concurrency 1 --strategies sequential padoc hsd:drafts=oracle \
  padoc_hsd:drafts=oracle padoc_hsd:drafts=oracle,stage1=false hsd:stage1=false padoc_hsd:stage1=false \
  padoc_hsd:stage1=false,draft_len=adaptive padoc_hsd --warm-drafts --out runs/bench_hsd_c1_warm
# both runtimes on the same pages (needs the vllm extra: scripts/install_vllm.sh)
$PY -m treedec run runtime=vllm strategy=padoc compare=sequential data.pages=32 out=runs/vllm-model || echo "(vLLM not installed: skipped)"
$PY -m treedec run strategy=padoc compare=sequential data.pages=32 out=runs/embedded-model
