#!/usr/bin/env bash
# World Flux v3 on one GPU: the command its model card names, and how its files
# come back from a machine that returns at most 8 files of 16 MiB.
#
#   benchmarks/gpu/world_flux_v3.sh OUT [MINUTES] [extra train-flux flags]
#
# Renders the world with 16 processes, fits a 2x-downsampling VAE (32 px -> 16 x 16 x 8
# latents, 8 x 8 = 64 transformer tokens) and trains the transformer for MINUTES (default 3)
# of wall time on CUDA (DEVICE=cpu to try it here with --tiny), then writes OUT/world_flux_v3.tar.part-* (15 MiB pieces of the
# pipeline folder; `cat OUT/world_flux_v3.tar.part-* | tar -x` restores it) and OUT/run.log.
set -euo pipefail
out=${1:?usage: world_flux_v3.sh OUT [MINUTES] [train-flux flags]}
minutes=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
mkdir -p "$out"
work=$(mktemp -d)
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")' | tee -a "$out/run.log"
# the command module itself: the CLI would first ask for every package of the [tdg] extra
python3 -c 'import argparse, sys; from concept_grounding.commands import train_flux as t
p = argparse.ArgumentParser(); t.add_arguments(p); sys.exit(t.run(p.parse_args()))' \
    --out "$work/world_flux_v3" --work-dir "$work/work" --device "${DEVICE:-cuda}" --workers 16 --threads 4 \
    --size 32 --pose canonical --scene plain --per-class 800 --vae-blocks 64,128 --latent-channels 8 \
    --vae-steps 4000 --vae-batch 128 --vae-lr 1e-3 --vae-deviant-per-class 400 --vae-part-weight 1 \
    --minutes "$minutes" --batch 512 --lr 5e-4 --warmup 200 --layers 2 --single-layers 4 --heads 4 --head-dim 64 \
    --checkpoint-every 1000 --seed 0 "$@" 2>&1 | tr '\r' '\n' | grep -v '^\s*$' | awk 'NR % 50 == 1 || !/it\/s|s\/it/' | tee -a "$out/run.log"
cp "$work/work/log.json" "$out/work_log.json"
tar -C "$work" -cf - world_flux_v3 | split -b 15M - "$out/world_flux_v3.tar.part-"
ls -la "$out" | tee -a "$out/run.log"
