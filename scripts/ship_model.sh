#!/usr/bin/env bash
# Copy a trained checkpoint (weights, tokenizer, serving configs, treedec.json; not the
# optimizer state) and its training curves into treedec/assets/models/tiny, the shipped
# default; its model card (README.md) stays, to be updated by hand.
# Usage: bash scripts/ship_model.sh TRAIN_OUT   (the train command's out= folder)
set -euo pipefail
src=${1:?usage: scripts/ship_model.sh TRAIN_OUT}
ckpt="$src/model"; [ -d "$ckpt" ] || ckpt="$src/checkpoints/last"
dst=treedec/assets/models/tiny
mkdir -p "$dst" && find "$dst" -mindepth 1 ! -name README.md -delete
for f in config.json generation_config.json model.safetensors processor_config.json tokenizer.json \
         tokenizer_config.json treedec.json; do cp "$ckpt/$f" "$dst/"; done
[ -f "$src/loss.png" ] && cp "$src/loss.png" "$dst/training.png"
[ -f "$src/history.jsonl" ] && cp "$src/history.jsonl" "$dst/training_history.jsonl"
du -sh "$dst"
