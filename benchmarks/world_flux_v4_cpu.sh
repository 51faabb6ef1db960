#!/usr/bin/env bash
# World Flux v4 on the CPU (issue 44 item 2, no GPU lent): the shipped v3 fine-tuned on the
# extended world, resumable (run it again with the same WORK to continue after an interrupt):
#
#   benchmarks/world_flux_v4_cpu.sh [OUT] [WORK] [MINUTES]
#
# * the data: 240 canonical renders per SUB species plus as many compositions (1-3 birds, a
#   varied scene and facing; captions name the count, relation and action), guide captions 0.45;
# * the VAE: v3's encoder and latent space kept, its decoder refitted (300 steps of batch 64,
#   part-weighted, 60 deviant renders per class): v3's decoder cannot draw the scenes (a round
#   trip keeps the scene of 16 % of compositions, its encoder's latents separate them linearly);
# * the transformer and text encoders: v3's, the vocabulary grown by the composition words,
#   trained for MINUTES (default 80) of wall time at batch 32 on one thread.
# Then: python benchmarks/bench_world_compositions.py --pipeline OUT (docs/conceptbed/world_flux_v4.md).
set -euo pipefail
out=${1:-runs/world_flux_v4}
work=${2:-runs/world_flux_v4_work}
minutes=${3:-80}
exec "${PYTHON:-python}" -m concept_grounding.cli train-flux \
  --out "$out" --work-dir "$work" --device cpu --threads 1 --workers 1 --seed 0 \
  --init-from src/concept_grounding/assets/world_flux --vae-decoder-only \
  --size 32 --pose canonical --scene plain --per-class 240 --compositions 1.0 --guide-captions 0.45 \
  --vae-blocks 64,128 --latent-channels 8 --vae-steps 300 --vae-batch 64 --vae-lr 5e-4 \
  --vae-deviant-per-class 60 --vae-part-weight 1 \
  --layers 2 --single-layers 4 --heads 4 --head-dim 64 \
  --minutes "$minutes" --batch 32 --lr 3e-4 --warmup 50 --checkpoint-every 25
