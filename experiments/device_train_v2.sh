#!/usr/bin/env bash
# Model v2's training (issue 20) in one call of the GPU machine, which keeps nothing between
# calls. Here, first: `bash scripts/device_wheels.sh` (the packages its image lacks, into .whl/);
# then the device tool's run with command "bash experiments/device_train_v2.sh", carry [".whl"],
# timeout_s 600. What it does there:
#   1. installs .whl/ into /tmp/site (no network there; pip only unpacks);
#   2. times 13 steps of experiments/train_v2.sh (bf16; PAGES_PER_STEP=16 pages a step, not the CPU's
#      4: a 5 M-parameter model leaves an H200 idle at 4; 14 batch workers) and sizes the run to
#      TRAIN_S seconds (default 360) at that pace: at least MIN_STEPS (2000, the CPU schedule), at
#      most 15000 (v1's step count), the schedule's stages as in tiny_v2.yaml;
#   3. trains, stopped after TRAIN_S + 120 s in any case (checkpoints every 200 steps);
#   4. writes $OUT/v2_model.tar (the checkpoint folder, weights in fp16: `model.path=` it here,
#      or ship it with scripts/ship_model.sh after unpacking), $OUT/history.jsonl (one row per
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
TRAIN_S=${TRAIN_S:-360}
MIN_STEPS=${MIN_STEPS:-2000}
mkdir -p "$OUT" "$WORK"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/train.log"
# 1-2. the pace: median step time of steps 4-PACE_STEPS (the first ones hold start-up and kernel compilation)
PACE_STEPS=${PACE_STEPS:-13}
bash experiments/train_v2.sh "$WORK/pace" train.steps="$PACE_STEPS" train.ckpt_every=1000 train.pages_per_step="$PAGES_PER_STEP" \
  > "$OUT/pace.log" 2>&1
steps=$($PY - "$WORK/pace/run/history.jsonl" "$TRAIN_S" "$MIN_STEPS" 2>> "$OUT/train.log" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])][3:]
pace = statistics.median(r["step_s"] for r in rows)
steps = max(int(sys.argv[3]), min(15000, int(float(sys.argv[2]) / pace)))
print(f"pace: {pace:.3f} s a step (median of {len(rows)}), batch wait {statistics.median(r['batch_s'] for r in rows):.3f} s -> {steps} steps", file=sys.stderr)
print(steps)
PYEOF
)
echo "steps: $steps" | tee -a "$OUT/train.log"
# 3. the run, from the pace run's warm start (made once)
mkdir -p "$WORK/v2" && cp -r "$WORK/pace/init" "$WORK/v2/init"
start=$(date +%s)
timeout -s INT $((TRAIN_S + 120)) bash experiments/train_v2.sh "$WORK/v2" train.steps="$steps" train.ckpt_every=200 \
  train.pages_per_step="$PAGES_PER_STEP" \
  >> "$OUT/train.log" 2>&1 || echo "training stopped: rc $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/train.log"
echo "training wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/train.log"
# 4. the results
ckpt="$WORK/v2/run/model"; [ -d "$ckpt" ] || ckpt="$WORK/v2/run/checkpoints/last"
mkdir -p "$WORK/ship/v2_model"
for f in config.json generation_config.json model.safetensors processor_config.json tokenizer.json tokenizer_config.json \
         treedec.json; do cp "$ckpt/$f" "$WORK/ship/v2_model/"; done
$PY scripts/half_weights.py "$WORK/ship/v2_model/model.safetensors"
tar -C "$WORK/ship" -cf "$OUT/v2_model.tar" v2_model
if [ -f "$WORK/v2/run/history.jsonl" ]; then cp "$WORK/v2/run/history.jsonl" "$OUT/"
else $PY -c "import json, sys, torch; [print(json.dumps(r)) for r in torch.load(sys.argv[1], weights_only=False)['history']]" \
       "$ckpt/trainer_state.pt" > "$OUT/history.jsonl"; fi
tail -n 3 "$OUT/history.jsonl"
ls -l "$OUT"
