#!/usr/bin/env bash
# Model v2 (issue 20): the shipped tiny_v1 weights moved to 640 px pages (warm_start_v2.py: ViT
# position grid 16x16 -> 40x40), then trained on `v2_model` pages with the project's own
# command: python -m treedec train +experiment=tiny_v2 (treedec/conf/experiment/tiny_v2.yaml).
#
#   CPU, in the background:  nice -n 19 nohup bash experiments/train_v2.sh /work/treedec-train/v2 > /work/treedec-train/v2.log 2>&1 &
#   CPU, both cores:         NPROC=2 bash experiments/train_v2.sh OUT   (two gloo ranks, one thread each:
#                            5.6 s a step against 6.9 s for one process of two threads, same losses)
#   GPU:                     DEVICE=cuda bash experiments/train_v2.sh OUT
#   extra train overrides:   bash experiments/train_v2.sh OUT train.steps=8000
#
# Rerun the same line to resume: the warm start is made once (OUT/init), and `train` goes on
# from OUT/run/checkpoints/last. Progress: OUT/run/checkpoints/last/trainer_state.pt holds the
# history; the log shows tqdm's loss and token accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: train_v2.sh OUT [train overrides...]}
shift
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
DEVICE=${DEVICE:-auto}
# bf16 autocast on a GPU; float32 on CPU (CPUs without bf16 units emulate it, several times slower)
if [ "$DEVICE" = cpu ] || { [ "$DEVICE" = auto ] && ! $PY -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; }; then
  BF16=false; THREADS=${THREADS:-1}  # one thread: the machine's cores are shared
  WORKERS=${WORKERS:-0}
else
  # batches made ahead by 8 forked workers: a step's four 640 px pages take ~0.3 CPU-s to draw
  # and pack, longer than the GPU's step (treedec/training/prefetch.py)
  BF16=true; THREADS=${THREADS:-2}; WORKERS=${WORKERS:-8}
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
[ -f "$OUT/init/treedec.json" ] || $PY experiments/warm_start_v2.py "$OUT/init"
# NPROC > 1: data parallel ranks under torchrun (gloo on CPU, one thread each; nccl on GPUs)
NPROC=${NPROC:-1}
if [ "$NPROC" -gt 1 ]; then
  LAUNCH=("$PY" -m torch.distributed.run --standalone --nproc_per_node "$NPROC")
  if [ "$BF16" = false ]; then THREADS=1; fi  # on CPU the ranks take a core each
else
  LAUNCH=("$PY")
fi
exec "${LAUNCH[@]}" -m treedec train +experiment=tiny_v2 model.path="$OUT/init" train.device="$DEVICE" train.bf16=$BF16 train.threads=$THREADS train.loader_workers=$WORKERS \
  out="$OUT/run" "$@"
