#!/usr/bin/env bash
# Issue 31's probe: linear against planar (2-D) rotary positions for image patches
# (treedec/models/planar_rope.py). Results: experiments/probes/NOTES.md, "Planar positions".
#
#   bash experiments/probes/positions_probe.sh OUT [STEPS] [SMALL_STEPS]
#
# 1. Same initialisation (the shipped v1 weights moved to 640 px, experiments/warm_start_v2.py;
#    the two inits hold the same weights, only treedec.json's `positions` differs), same pages
#    (tiny_v2's, seed 0), same schedule, STEPS steps each (default 100): the per-step curves of
#    token accuracy and of the reading head (steer_p, readout_acc) by experiments/probes/curves.py.
# 2. Small pages, large pages: v1 trained on on its own 256 px pages for SMALL_STEPS more steps
#    (default 100) with each kind of positions, then moved to 640 px and read, teacher forced, on
#    held-out v2_model pages (rope_gap.py --gaps 0 --preset v2_model, seed 777), beside the 640 px
#    inits of step 1 read the same way.
# The arms run side by side, one thread each (two cores). CPU figures: float32.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: positions_probe.sh OUT [STEPS] [SMALL_STEPS]}
STEPS=${2:-100}
SMALL=${3:-100}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
export OMP_NUM_THREADS=1
CPU=(train.device=cpu train.bf16=false train.threads=1 train.loader_workers=0 train.ckpt_every=25)
mkdir -p "$OUT"

for r in linear planar; do
  [ -f "$OUT/init_$r/treedec.json" ] || $PY experiments/warm_start_v2.py "$OUT/init_$r" --rope "$r"
  $PY -m treedec train +experiment=tiny_v2 model.path="$OUT/init_$r" "${CPU[@]}" train.stop_after="$STEPS" \
    out="$OUT/run_$r" > "$OUT/run_$r.log" 2>&1 &
done
wait
$PY experiments/probes/curves.py "$OUT/run_linear" "$OUT/run_planar" --plot "$OUT/curves_640.png"

# 2. v1's own pages (the final stage of tiny_v1), a warm restart of SMALL steps from step 4400
for r in linear planar; do
  [ -f "$OUT/v1_$r/treedec.json" ] || $PY experiments/warm_start_v2.py "$OUT/v1_$r" --image-size 256 --preset v1 --rope "$r"
  $PY -m treedec train +experiment=tiny_v1 model.path="$OUT/v1_$r" "${CPU[@]}" train.grounding.vision_warmup=0 \
    train.start_step=4400 train.restart=4400 train.warmup=10 train.steps=$((4400 + SMALL)) \
    out="$OUT/small_$r" > "$OUT/small_$r.log" 2>&1 &
done
wait
$PY experiments/probes/curves.py "$OUT/small_linear" "$OUT/small_planar" --plot "$OUT/curves_256.png"
for r in linear planar; do
  [ -f "$OUT/large_$r/treedec.json" ] || $PY experiments/warm_start_v2.py "$OUT/large_$r" \
    --source "$OUT/small_$r/checkpoints/last" --rope "$r"
done
$PY experiments/probes/rope_gap.py --gaps 0 --preset v2_model --pages 6 \
  --model "$OUT/init_linear" "$OUT/init_planar" "$OUT/large_linear" "$OUT/large_planar"
$PY experiments/probes/rope_gap.py --gaps 0 --pages 6 --model "$OUT/small_linear/checkpoints/last" "$OUT/small_planar/checkpoints/last"
