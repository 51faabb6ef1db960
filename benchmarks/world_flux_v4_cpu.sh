#!/usr/bin/env bash
# World Flux v4 on the CPU (when no GPU is lent): the shipped v3 fine-tuned on the
# extended world in two resumable runs (run it again with the same folders to continue after an
# interrupt: every finished stage is kept):
#
#   benchmarks/world_flux_v4_cpu.sh [OUT] [MINUTES] [OUT2] [MINUTES2]
#
# Run 1 (OUT, its work dir OUT_work), MINUTES (default 80) of transformer wall time:
# * the data: 240 canonical renders per SUB species plus as many compositions (1-3 birds, a
#   varied scene and facing; captions name the count, relation and action), guide captions 0.45;
# * the VAE: v3's encoder and latent space kept, its decoder refitted (300 steps of batch 64,
#   part-weighted, 60 deviant renders per class): v3's decoder cannot draw the scenes (a round
#   trip keeps the scene of 16 % of compositions, its encoder's latents separate them linearly);
# * the transformer and text encoders: v3's, the vocabulary grown by the composition words,
#   batch 32, lr 3e-4, one thread.
# Run 2 (only with OUT2): from OUT, its VAE kept (so run 1's renders and latents are reused),
#   MINUTES2 (default 32) more at lr 2e-4 on two threads.
# Then: python benchmarks/bench_world_compositions.py --pipeline OUT2 (docs/conceptbed/world_flux_v4_compositions.md).
set -euo pipefail
out=${1:-runs/world_flux_v4}
minutes=${2:-80}
out2=${3:-}
minutes2=${4:-32}
py=${PYTHON:-python}
sizes=(--size 32 --pose canonical --scene plain --per-class 240 --compositions 1.0 --guide-captions 0.45
       --vae-blocks 64,128 --latent-channels 8 --layers 2 --single-layers 4 --heads 4 --head-dim 64
       --batch 32 --warmup 50 --checkpoint-every 25 --device cpu --workers 1 --seed 0)
"$py" -m concept_grounding.cli train-flux --out "$out" --work-dir "${out}_work" "${sizes[@]}" --threads 1 \
  --init-from src/concept_grounding/assets/world_flux --vae-decoder-only --vae-steps 300 --vae-batch 64 \
  --vae-lr 5e-4 --vae-deviant-per-class 60 --vae-part-weight 1 --minutes "$minutes" --lr 3e-4
[ -z "$out2" ] && exit 0
mkdir -p "${out2}_work"
for f in data.npz latents.pt; do  # run 1's renders, and its latents (the encoder is v3's in both)
  [ -e "${out2}_work/$f" ] || ln -s "$(cd "${out}_work" && pwd)/$f" "${out2}_work/$f"
done
"$py" -m concept_grounding.cli train-flux --out "$out2" --work-dir "${out2}_work" "${sizes[@]}" --threads 2 \
  --init-from "$out" --vae-steps 0 --minutes "$minutes2" --lr 2e-4
