#!/usr/bin/env bash
# A GPU round on one GPU, as one command whose files fit what a device machine
# returns (at most 8 files of 16 MiB):
#
#   benchmarks/gpu/gpu_round.sh OUT [MINUTES] [BUDGET_S]
#
# 1. world Flux v4 (compositions): the v3 recipe (benchmarks/gpu/world_flux_v3.sh) on the
#    extended world: 800 canonical renders per species plus 400 compositions (1-3 birds, varied
#    scene and facing; captions name count, relation and action), guide captions 0.45, the
#    transformer trained for MINUTES (default 3) of wall time. OUT/world_flux_v4.tar.part-*
#    restore the pipeline folder (`cat OUT/world_flux_v4.tar.part-* | tar -x`).
# 2. TDG vs prompting on it (benchmarks/bench_tdg_world.py: validation, quality incl. colour
#    guides, substitution on all 849 pairings; the shipped judge seeds the judge cache: it was
#    trained with the default judge settings on the same canonical world).
# 3. its composition categories (benchmarks/bench_world_compositions.py).
# 4. if less than BUDGET_S (default 430) seconds have passed: TDG at FLUX.2 [klein] size
#    (benchmarks/bench_tdg_family.py --klein-size).
# Reports go to OUT/reports.tar, the log to OUT/run.log. DEVICE=cpu TINY=1 smoke-tests it here.
set -uo pipefail
out=${1:?usage: gpu_round.sh OUT [MINUTES] [BUDGET_S]}
minutes=${2:-3}
budget=${3:-430}
device=${DEVICE:-cuda}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
rep="$work/reports"
mkdir -p "$rep"
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$out/run.log"; }
quiet() { tr '\r' '\n' | grep -v '^\s*$' | awk 'NR % 50 == 1 || !/it\/s|s\/it/' | tee -a "$out/run.log"; }
python3 -c 'import torch, diffusers; print(torch.__version__, diffusers.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")' | tee -a "$out/run.log"

log "1. world Flux v4"
if [ -n "${TINY:-}" ]; then size_flags=(--tiny --compositions 0.5); else size_flags=(
    --size 32 --pose canonical --scene plain --per-class 800 --compositions 0.5 --guide-captions 0.45
    --vae-blocks 64,128 --latent-channels 8 --vae-steps 2500 --vae-batch 128 --vae-lr 1e-3
    --vae-deviant-per-class 400 --vae-part-weight 1 --minutes "$minutes" --batch 512 --lr 5e-4 --warmup 200
    --layers 2 --single-layers 4 --heads 4 --head-dim 64 --checkpoint-every 1000); fi
timeout 420 python3 -c 'import argparse, sys; from concept_grounding.commands import train_flux as t
p = argparse.ArgumentParser(); t.add_arguments(p); sys.exit(t.run(p.parse_args()))' \
    --out "$work/world_flux_v4" --work-dir "$work/work" --device "$device" --workers 16 --threads 4 \
    --seed 0 "${size_flags[@]}" 2>&1 | quiet
cp "$work/work/log.json" "$rep/train_work_log.json" 2>/dev/null
if [ -f "$work/world_flux_v4/model_index.json" ]; then
  tar -C "$work" -cf - world_flux_v4 | split -b 15M - "$out/world_flux_v4.tar.part-"
  cp "$work/world_flux_v4/train_log.json" "$rep/" 2>/dev/null
else
  log "no pipeline folder: stopping"; tar -C "$work" -cf "$out/reports.tar" reports; exit 1
fi

log "2. TDG vs prompting on v4"
judge="$rep/tdg/judges-s32-canonical-plain-z1-n150-e32-seed0/judge"
mkdir -p "$judge" && cp src/concept_grounding/assets/world_judge/{config.json,model.safetensors} "$judge/"
tdg_flags=(--images 1 --validation-edits 2 --batch 256)
[ -n "${TINY:-}" ] && tdg_flags=(--images 1 --validation-edits 1 --validation-renders 1 --limit-pairings 3 --quality-images 1 --bootstrap 10)
timeout 150 python3 benchmarks/bench_tdg_world.py --pipeline "$work/world_flux_v4" --out "$rep/tdg" --device "$device" \
    --stages validate quality substitution --threads 8 "${tdg_flags[@]}" 2>&1 | quiet
rm -rf "$rep/tdg/judges-"*

log "3. compositions on v4"
comp_flags=(--batch 256)
[ -n "${TINY:-}" ] && comp_flags=(--judge-per-class 4 --judge-epochs 1 --validation-per-class 2 --images 1)
timeout 120 python3 benchmarks/bench_world_compositions.py --pipeline "$work/world_flux_v4" --out "$rep/compositions" \
    --device "$device" --no-progress --train-judge "${comp_flags[@]}" 2>&1 | quiet
rm -rf "$rep/compositions/composition-judge-"*/model.safetensors

if [ "$SECONDS" -lt "$budget" ] && [ "$device" = cuda ]; then
  log "4. TDG at FLUX.2 [klein] size"
  timeout $(( budget + 120 - SECONDS )) python3 benchmarks/bench_tdg_family.py --klein-size --rounds 5 \
      --json "$rep/klein.json" 2>&1 | quiet
else
  log "4. skipped (${SECONDS}s >= ${budget}s, or not CUDA)"
fi
tar -C "$work" -cf "$out/reports.tar" reports
log "done"
ls -la "$out" | tee -a "$out/run.log"
