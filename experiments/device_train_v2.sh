#!/usr/bin/env bash
# Model v2's training (issue 20) in one call of the GPU machine, which keeps nothing between
# calls. Here, first: `bash scripts/device_wheels.sh` (the packages its image lacks, into .whl/);
# then the device tool's run with command "bash experiments/device_train_v2.sh", carry [".whl"],
# timeout_s 600. What it does there:
#   1. installs .whl/ into /tmp/site (no network there; pip only unpacks);
#   2. checks that everything imports, then times 13 steps of experiments/train_v2.sh on full v2
#      pages (bf16; PAGES_PER_STEP=16 pages a step, not the CPU's 4: a 5 M-parameter model leaves
#      an H200 idle at 4), batches made in-process so that both paces are seen: the GPU's step and
#      a batch's making; the run's pace is the slower of the step and a batch / WORKERS (14 batch
#      workers, fewer if /dev/shm is small), and its length TRAIN_S seconds (default 330) of that
#      pace: at least MIN_STEPS (500), at most 15000 (v1's step count), stages as in tiny_v2.yaml;
#   3. trains with train.time_limit_s=TRAIN_S (it stops after the step that reaches it, with a
#      checkpoint, if the pace was misjudged), killed after TRAIN_S + 150 s in any case;
#   4. writes $OUT/v2_model.tar (the checkpoint folder as scripts/ship_model.sh ships one: weights
#      in fp16, training.png, training_summary.json; unpack it and `model.path=` it, or copy it
#      under treedec/assets/models/), $OUT/history.jsonl (one row per
#      step), $OUT/train.log and $OUT/pace.log. The device tool brings back at most 8 files of 16 MiB.
# Locally, to check the script: SKIP_WHEELS=1 PYTHON=.venv/bin/python DEVICE=cpu WORKERS=0 PAGES_PER_STEP=4 PACE_STEPS=5 \
#   TRAIN_S=30 MIN_STEPS=2 OUT=/tmp/o WORK=/tmp/w bash experiments/device_train_v2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?OUT: the folder whose files come back (the device tool sets it)}
if [ -z "${SKIP_WHEELS:-}" ]; then
  [ -d .whl ] || { echo "no .whl/: run scripts/device_wheels.sh here and carry .whl" >&2; exit 2; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHON=$PY DEVICE=${DEVICE:-cuda} WORKERS=${WORKERS:-14}
PAGES_PER_STEP=${PAGES_PER_STEP:-16}
WORK=${WORK:-/tmp/treedec-v2}
TRAIN_S=${TRAIN_S:-330}
MIN_STEPS=${MIN_STEPS:-500}
mkdir -p "$OUT" "$WORK"
: > "$OUT/train.log"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$OUT/train.log"
$PY -c "import torch, transformers, hydra, omegaconf, Levenshtein, apted, treedec.cli, treedec.training.trainer
print('imports: torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)" \
  2>&1 | tee -a "$OUT/train.log"
# prefetched batches travel through /dev/shm: ~160 MB each at 16 pages, two queued per worker
shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9); shm_gb=${shm_gb:-0}
if [ "$WORKERS" -gt 0 ] && [ $(( WORKERS * 2 * 2 )) -gt $(( shm_gb * 10 / 16 )) ]; then
  WORKERS=$(( shm_gb * 10 / 16 / 4 )); [ "$WORKERS" -ge 1 ] || WORKERS=0
  echo "/dev/shm has ${shm_gb} GB free: $WORKERS batch workers" | tee -a "$OUT/train.log"
fi
# 1-2. the pace: median step time of steps 4-PACE_STEPS (the first ones hold start-up and kernel compilation)
PACE_STEPS=${PACE_STEPS:-13}
WORKERS=0 bash experiments/train_v2.sh "$WORK/pace" train.start_step=1000 train.steps=$(( 1000 + PACE_STEPS )) \
  train.ckpt_every=100000 train.pages_per_step="$PAGES_PER_STEP" > "$OUT/pace.log" 2>&1
steps=$($PY - "$WORK/pace/run/history.jsonl" "$TRAIN_S" "$MIN_STEPS" "$WORKERS" 2>> "$OUT/train.log" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])][3:]
budget, floor, workers = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
compute = statistics.median(r["step_s"] - r["batch_s"] for r in rows)
making = statistics.median(r["batch_s"] for r in rows)
pace = max(compute, making / workers if workers else compute + making)
steps = max(floor, min(15000, int(budget / pace)))
print(f"pace (median of {len(rows)} steps on full pages): step {compute:.3f} s, making a batch {making:.3f} s, "
      f"{workers} workers -> {pace:.3f} s a step -> {steps} steps", file=sys.stderr)
print(steps)
PYEOF
)
echo "steps: $steps" | tee -a "$OUT/train.log"
# 3. the run, from the pace run's warm start (made once)
mkdir -p "$WORK/v2" && cp -r "$WORK/pace/init" "$WORK/v2/init"
start=$(date +%s)
timeout -s INT $((TRAIN_S + 150)) bash experiments/train_v2.sh "$WORK/v2" train.steps="$steps" train.ckpt_every=200 \
  train.pages_per_step="$PAGES_PER_STEP" train.time_limit_s="$TRAIN_S" \
  >> "$OUT/train.log" 2>&1 || echo "training stopped: rc $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/train.log"
echo "training wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/train.log"
# 4. the results: the checkpoint as ship_model.sh ships one (weights in fp16, curves plotted), as one tar
if [ ! -f "$WORK/v2/run/history.jsonl" ]; then  # killed before `train` wrote it: the last checkpoint's
  $PY -c "import json, sys, torch; [print(json.dumps(r)) for r in torch.load(sys.argv[1], weights_only=False)['history']]" \
    "$WORK/v2/run/checkpoints/last/trainer_state.pt" > "$WORK/v2/run/history.jsonl"
fi
DST="$WORK/ship/v2_model" bash scripts/ship_model.sh "$WORK/v2/run" >> "$OUT/train.log" 2>&1
tar -C "$WORK/ship" -cf "$OUT/v2_model.tar" v2_model
cp "$WORK/v2/run/history.jsonl" "$OUT/"
tail -n 3 "$OUT/history.jsonl"
ls -l "$OUT"
