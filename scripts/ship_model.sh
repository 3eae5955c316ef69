#!/usr/bin/env bash
# Copy a trained checkpoint (weights, tokenizer, serving configs, treedec.json; not the
# optimizer state) and its training curves into treedec/assets/models/tiny, the shipped
# default; its model card (README.md) stays, to be updated by hand.
# Usage: bash scripts/ship_model.sh TRAIN_OUT [STEP]
#   TRAIN_OUT: the train command's out= folder; ships TRAIN_OUT/model (else checkpoints/last)
#   STEP: ship the weights kept at that step instead (checkpoints/step-STEP, kept with
#         train.average=N), with the training curves cut at that step
set -euo pipefail
src=${1:?usage: scripts/ship_model.sh TRAIN_OUT [STEP]}
step=${2:-}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
if [ -n "$step" ]; then
  ckpt="$src/checkpoints/step-$step"
  [ -d "$ckpt" ] || { echo "no $ckpt (steps kept: $(ls "$src/checkpoints" | grep '^step-' | tr '\n' ' '))" >&2; exit 2; }
else
  ckpt="$src/model"; [ -d "$ckpt" ] || ckpt="$src/checkpoints/last"
fi
dst=treedec/assets/models/tiny
mkdir -p "$dst" && find "$dst" -mindepth 1 ! -name README.md -delete
for f in config.json generation_config.json model.safetensors processor_config.json tokenizer.json \
         tokenizer_config.json treedec.json; do cp "$ckpt/$f" "$dst/"; done
if [ -f "$src/history.jsonl" ]; then
  if [ -n "$step" ]; then
    $PY - "$src/history.jsonl" "$dst" "$step" <<'PYEOF'
import json, sys
from treedec.commands.train import plot_history
rows = [json.loads(line) for line in open(sys.argv[1])]
rows = [r for r in rows if r["step"] <= int(sys.argv[3])]
open(f"{sys.argv[2]}/training_history.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in rows))
plot_history(rows, f"{sys.argv[2]}/training.png")
PYEOF
  else
    cp "$src/history.jsonl" "$dst/training_history.jsonl"
    [ -f "$src/loss.png" ] && cp "$src/loss.png" "$dst/training.png"
  fi
fi
du -sh "$dst"
