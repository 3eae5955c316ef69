#!/usr/bin/env bash
# Copy a trained checkpoint (weights, tokenizer, serving configs, treedec.json; not the
# optimizer state) into treedec/assets/models/tiny, the shipped default, its weights stored in
# half precision (scripts/half_weights.py; loading computes in float32), with its training
# curves as a plot (training.png) and a short summary (training_summary.json: first and last
# rows, best loss and accuracy, stage changes); its model card (README.md) stays, to be
# updated by hand. The full curves (one row per step, megabytes) stay out of the repository:
# they are written beside the run, TRAIN_OUT/shipped_history.jsonl.
# Usage: bash scripts/ship_model.sh TRAIN_OUT [STEP]
#   TRAIN_OUT: the train command's out= folder; ships TRAIN_OUT/model (else checkpoints/last)
#   STEP: ship the weights kept at that step instead (checkpoints/step-STEP, kept with
#         train.average=N), with the training curves cut at that step
#   HISTORY_BEFORE=FILE (environment): a run that went on from earlier weights
#         (train.start_step=N) logs steps after N only; its curves are prefixed with FILE's rows
#         before its first step (e.g. the shipped_history.jsonl of the run it went on from)
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
dst=${DST:-treedec/assets/models/tiny}  # DST=DIR: the same into another folder (experiments/device_train_v2.sh)
before=${HISTORY_BEFORE:-}
[ -z "$before" ] || [ -f "$before" ] || { echo "HISTORY_BEFORE: no file $before" >&2; exit 2; }
before_copy=$(mktemp)  # copied first: it may be the shipped history, replaced below
trap 'rm -f "$before_copy"' EXIT
if [ -n "$before" ]; then cp "$before" "$before_copy"; fi
mkdir -p "$dst" && find "$dst" -mindepth 1 ! -name README.md -delete
for f in config.json generation_config.json model.safetensors processor_config.json tokenizer.json \
         tokenizer_config.json treedec.json; do cp "$ckpt/$f" "$dst/"; done
$PY scripts/half_weights.py "$dst/model.safetensors"
if [ -f "$src/history.jsonl" ]; then
  $PY - "$src/history.jsonl" "$dst" "${step:-}" "$before_copy" "$src/shipped_history.jsonl" <<'PYEOF'
import json, sys
from treedec.commands.train import plot_history
history, dst, step, before, full = sys.argv[1:]
rows = [json.loads(line) for line in open(history)]
if step:
    rows = [r for r in rows if r["step"] <= int(step)]
prior = [json.loads(line) for line in open(before)]
if prior and rows:
    prior = [r for r in prior if r["step"] < rows[0]["step"]]
    print(f"curves: {len(prior)} rows before step {rows[0]['step']} from HISTORY_BEFORE")
rows = prior + rows
open(full, "w").write("".join(json.dumps(r) + "\n" for r in rows))
plot_history(rows, f"{dst}/training.png")
text = [r for r in rows if r.get("loss", 0) > 0]  # none during the vision-only grounding warm-up
best_loss = min(text, key=lambda r: r["loss"], default=None)
best_acc = max(text, key=lambda r: r.get("token_acc", 0), default=None)
last = text[-20:]
summary = {
    "rows": len(rows), "full_history": "TRAIN_OUT/shipped_history.jsonl of the run that shipped these weights",
    "first": rows[0] if rows else None, "last": rows[-1] if rows else None,
    "min_loss": {"step": best_loss["step"], "loss": best_loss["loss"]} if text else None,
    "max_token_acc": {"step": best_acc["step"], "token_acc": best_acc["token_acc"]} if text else None,
    "last_20_mean": {k: sum(r[k] for r in last) / len(last) for k in ("loss", "token_acc")} if last else None,
    "stage_changes": [{"step": r["step"], "stage": r.get("stage")} for p, r in zip(rows, rows[1:])
                      if r.get("stage") != p.get("stage")],
}
open(f"{dst}/training_summary.json", "w").write(json.dumps(summary, indent=1) + "\n")
print(f"full curves ({len(rows)} rows): {full}")
PYEOF
fi
du -sh "$dst"
