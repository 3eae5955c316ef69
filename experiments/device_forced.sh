#!/usr/bin/env bash
# Issue 32's table on a GPU in one call (issue 32.6): the forced sweep (experiments/sweeps/forced.yaml:
# sequential, padoc, table_rows, crops, hsd, padoc_hsd at 16 and 1 pages in flight, each job in a
# process of its own) on the 12 OmniDocBench demo pages at each of SIZES (default 0.5b 1.5b) in
# DTYPE (default bfloat16) on DEVICE (default cuda), embedded engine; then experiments/forced_table.py:
# $OUT/forced_table.json and forced_table.png (median and mean steps, accepted tokens per step,
# pages/s measured and projected, P95 latency, ratios to sequential at the same size and level),
# $OUT/compare-SIZE.md (treedec compare's table) and $OUT/device_forced.log.
# The machine has no network: everything comes with the working tree. Here, first:
#   bash scripts/device_wheels.sh                                  # .whl/: Hydra, OmegaConf, ... (~15 MB)
#   DEMO_ONLY=1 OUT=/tmp/x bash experiments/device_forced.sh       # .demo/ (the pages) and .drafts/ (their drafts)
# then the device tool's run with command "bash experiments/device_forced.sh", carry [".whl", ".demo", ".drafts"].
# HSD's drafts there are the pipeline OCR's readings of the pages made here (its packages, OpenCV and
# ONNX Runtime, are more than a call can carry): they come from the draft cache, so hsd's and
# padoc_hsd's pages/s there leave drafting out (labelled in the table's JSON: drafts=precomputed);
# drafting's cost per page is measured by the CPU runs (docs/forced_results.md).
# Within a call's time: LEVELS=16 (one level), PHASES="sequential,padoc padoc_hsd hsd,table_rows,crops"
# (groups run in turn, each at every size), BUDGET_S=480 (the sweeps stop there; the table is made of
# the jobs that finished).
# With PROJECT_FROM="exp-forced-30m-v4" (kept in docs/figures/forced) or a sweep's folder at the DEMO_ONLY step (.sweeps/: carry it too), the call
# first projects those CPU sweeps' jobs at PROJECT_SIZES (default 0.5b 1.5b) with step costs timed on the
# GPU ($OUT/project-NAME/break_even.json, .png; labelled PROJECTION), then measures PHASES.
# With TOKENIZER=FILE (a .tiktoken or tokenizer.json) at the DEMO_ONLY step, the file goes to .tokenizer/ (carry
# it too); TOKENIZER=.tokenizer/FILE on the device then runs every job under that BPE (model.tokenizer), the
# profiled step too.
# Before all that, PROFILE_PROBES (default "12:12:6000 4:4:8000 1:1:10000") profiles one engine step of the
# first of SIZES ($OUT/profile_step.txt).
# On CPU, to check the script: SKIP_WHEELS=1 PYTHON=/path/to/venv/python DEVICE=cpu SIZES=1m PAGES=2 \
#   VISION_TOKENS=16 OUT=/tmp/o bash experiments/device_forced.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?OUT: the folder whose files come back (the device tool sets it)}
PY=${PYTHON:-python3}
DEMO_SRC=${DEMO_SRC:-../shared/omnidocbench_demo}
if [ -n "${DEMO_ONLY:-}" ]; then  # here: the pages and their drafts, into folders .gitignore ignores (carry them)
  rm -rf .demo .drafts && cp -r "$DEMO_SRC" .demo && rm -rf .demo/predictions_md && mkdir .drafts
  $PY - "${DRAFTS_FROM:-$HOME/.cache/treedec/drafts}" <<'PYEOF'
import shutil, sys
from treedec.data import open_dataset
from treedec.ocr.cache import draft_pages, lookup
from treedec.ocr.pipeline import PipelineConfig
pages = list(open_dataset({"name": "omnidocbench", "root": ".demo", "json": None, "limit": None}))
tag = PipelineConfig().tag()
for p in pages:  # drafts made before (the default cache): copied; the others drafted now
    path, page = lookup(sys.argv[1], p, tag)
    if page is not None:
        shutil.copy(path, ".drafts/")
print(f"{len(draft_pages(pages, '.drafts', progress=False))} pages' drafts in .drafts/")
PYEOF
  rm -rf .sweeps .tokenizer
  if [ -n "${TOKENIZER:-}" ]; then mkdir .tokenizer && cp "$TOKENIZER" .tokenizer/; fi
  # PROJECT_FROM: CPU sweeps whose counts the GPU projects: a sweep's folder (summary.json and config.yaml a
  # job), or SWEEP names kept in docs/figures/*/ as SWEEP_STRATEGY.json and SWEEP_STRATEGY.config.yaml
  for sweep in ${PROJECT_FROM:-}; do
    if [ -d "$sweep" ]; then
      for job in "$sweep"/*/summary.json; do
        dest=.sweeps/$(basename "$sweep")/$(basename "$(dirname "$job")")
        mkdir -p "$dest" && cp "$job" "$(dirname "$job")/config.yaml" "$dest/"
      done
    else
      kept=$(ls docs/figures/*/"${sweep}"_*.config.yaml 2>/dev/null) \
        || { echo "PROJECT_FROM: $sweep is neither a folder nor kept in docs/figures/*/" >&2; exit 2; }
      for cfg in $kept; do
        strategy=${cfg##*/"${sweep}"_}; strategy=${strategy%.config.yaml}
        dest=.sweeps/$sweep/strategy=$strategy
        mkdir -p "$dest" && cp "$cfg" "$dest/config.yaml" && cp "${cfg%.config.yaml}.json" "$dest/summary.json"
      done
    fi
  done
  du -sh .demo .drafts ${PROJECT_FROM:+.sweeps} ${TOKENIZER:+.tokenizer}
  exit 0
fi
if [ -z "${SKIP_WHEELS:-}" ]; then
  [ -d .whl ] || { echo "no .whl/: run scripts/device_wheels.sh here and carry .whl" >&2; exit 2; }
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -d .demo ] || { echo "no .demo/: run DEMO_ONLY=1 here first and carry .demo and .drafts" >&2; exit 2; }
# this checkout's treedec first, for the scripts run by path too (a venv may hold another checkout's, editable)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 TREEDEC_DRAFT_CACHE=$PWD/.drafts OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
SIZES=${SIZES:-0.5b 1.5b}
DTYPE=${DTYPE:-bfloat16}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-/tmp/treedec-forced}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/device_forced.log"
: > "$LOG"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$LOG"
$PY -c "import torch, transformers, hydra, omegaconf, Levenshtein, apted, treedec.cli
print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)" \
  2>&1 | tee -a "$LOG"
profile_tok=()
extra=(model.dtype="$DTYPE" model.device="$DEVICE" data.root="$PWD/.demo" cold_drafts=false)
[ -n "${PAGES:-}" ] && extra+=(data.limit="$PAGES")
[ -n "${VISION_TOKENS:-}" ] && extra+=(model.vision_tokens="$VISION_TOKENS")
[ -n "${LEVELS:-}" ] && extra+=(runtime.max_pages="$LEVELS")
[ -n "${THREADS:-}" ] && extra+=(runtime.threads="$THREADS")
if [ -n "${TOKENIZER:-}" ]; then
  [ -f "$TOKENIZER" ] || { echo "TOKENIZER=$TOKENIZER: no such file (carry .tokenizer)" >&2; exit 2; }
  tok_path="$(realpath "$TOKENIZER")"
  extra+=(model.tokenizer="$tok_path")
  profile_tok=(--tokenizer "$tok_path")
fi
# PROFILE_PROBES (first; "" for none): one engine step of the first of SIZES timed and profiled on this device
# (experiments/profile_step.py; PAGES:ROWS:KEYS each) into $OUT/profile_step.txt: where a step's time goes.
PROFILE_PROBES=${PROFILE_PROBES-12:12:6000 4:4:8000 1:1:10000}
if [ -n "$PROFILE_PROBES" ]; then
  probes=(); for pr in $PROFILE_PROBES; do probes+=(--probe "$pr"); done
  read -r first_size _ <<< "$SIZES"
  timeout --signal=TERM --kill-after=5 "${PROFILE_S:-120}" $PY experiments/profile_step.py --size "$first_size" \
    --device "$DEVICE" --dtype "$DTYPE" "${probes[@]}" "${profile_tok[@]}" --out "$OUT/profile_step.txt" >> "$LOG" 2>&1 \
    || echo "profile_step: failed or cut off (its log: $LOG)" | tee -a "$LOG"
fi
# PROJECT (then, when .sweeps/ came along): every carried CPU sweep's jobs projected at PROJECT_SIZES
# on this device (experiments/break_even.py --device: each job's buckets and prefills timed here,
# its engine and other seconds as measured on the sweep's machine), within PROJECT_S seconds.
PROJECT_SIZES=${PROJECT_SIZES-0.5b 1.5b}
if [ -d .sweeps ] && [ -n "$PROJECT_SIZES" ]; then
  for sweep in .sweeps/*/; do
    name=$(basename "$sweep")
    echo "== projection of $name at $PROJECT_SIZES" | tee -a "$LOG"
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout --signal=TERM --kill-after=5 "${PROJECT_S:-240}" $PY experiments/break_even.py --sweep "$sweep" \
      --sizes $PROJECT_SIZES --device "$DEVICE" --dtype "$DTYPE" --data-root "$PWD/.demo" \
      --budget "${PROJECT_BUDGET:-4}" --threads "${THREADS:-4}" --out "$OUT/project-$name" 2>&1 | tee -a "$LOG" \
      || echo "projection of $name: failed or cut off after $(( $(date +%s) - start )) s" | tee -a "$LOG"
  done
fi
# PHASES: groups of strategies run in turn, each group at every size before the next group, so that a
# call that runs out of time (BUDGET_S seconds for all sweeps; 0: none) keeps the most wanted jobs
# finished: a job cut off by the budget leaves no result and the table is made of those that finished.
PHASES=${PHASES:-sequential,padoc,table_rows,crops,hsd,padoc_hsd}
BUDGET_S=${BUDGET_S:-0}
t0=$(date +%s)
for phase in $PHASES; do
  for size in $SIZES; do
    left=$(( BUDGET_S > 0 ? BUDGET_S - ($(date +%s) - t0) : 0 ))
    if (( BUDGET_S > 0 && left < 20 )); then
      echo "budget: $phase at $size not run ($BUDGET_S s spent)" | tee -a "$LOG"; continue
    fi
    start=$(date +%s)
    echo "== size $size, strategies $phase: ${extra[*]}" | tee -a "$LOG"
    rc=0
    timeout --signal=TERM --kill-after=5 "$left" \
      $PY experiments/sweep.py forced model.size="$size" strategy="$phase" "${extra[@]}" out="$WORK/forced-$size" \
      >> "$LOG" 2>&1 || rc=$?
    if (( rc == 124 || rc == 137 )); then
      echo "size $size, $phase: cut off by the budget after $(( $(date +%s) - start )) s" | tee -a "$LOG"
    elif (( rc != 0 )); then
      echo "size $size, $phase: the sweep failed (rc $rc; its log: $LOG)" | tee -a "$LOG"; tail -n 20 "$LOG"
    else
      echo "size $size, $phase: $(( $(date +%s) - start )) s" | tee -a "$LOG"
    fi
  done
done
sweeps=()
for size in $SIZES; do
  find "$WORK/forced-$size" -name result.json 2>/dev/null | grep -q . || continue
  $PY -m treedec compare runs="$WORK/forced-$size" out="$WORK/forced-$size-compare" baseline=sequential >> "$LOG" 2>&1 \
    && cp "$WORK/forced-$size-compare/compare.md" "$OUT/compare-$size.md"
  sweeps+=(--sweep "$size=$WORK/forced-$size")
done
(( ${#sweeps[@]} )) || { echo "no job finished" | tee -a "$LOG"; exit 1; }
$PY experiments/forced_table.py "${sweeps[@]}" --out "$OUT" 2>&1 | tee -a "$LOG"
$PY - "$OUT/forced_table.json" "$DTYPE" "$DEVICE" "${TOKENIZER:-treedec char-level}" <<'PYEOF'
import json, sys
path, dtype, device, tokenizer = sys.argv[1:]
data = json.load(open(path))
data.update({"dtype": dtype, "device": device, "engine": "embedded", "tokenizer": tokenizer,
             "drafts": "precomputed: the pipeline OCR's, made before the call (hsd and padoc_hsd pages/s leave drafting out)"})
json.dump(data, open(path, "w"), indent=1)
PYEOF
ls -l "$OUT"
