#!/usr/bin/env bash
# The fused hop before and after, on the GPU machine from the repo root: TURNS turns of
# `device_hop` (31 pairs, the fused row only), the base (.gpu/base/device_hop-base) and
# NEW, which binary runs first alternating by turn (in the twenty-sixth session's first
# leases the binary run first had the lower ratio in five turns of six). Used by the
# session scripts (.ci/h200-session26.sh, .ci/h200-session27.sh).
# `bash .ci/h200-fused-ab.sh TURNS NEW`
set -u
turns=$1 new=$2
for turn in $(seq 1 "$turns"); do
  order=(.gpu/base/device_hop-base "$new"); [ $((turn % 2)) -eq 0 ] && order=("$new" .gpu/base/device_hop-base)
  for bin in "${order[@]}"; do
    echo "== fused turn $turn: $(basename "$bin")"; HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 "$bin" --bench | grep -E "^fused|^  fused"
  done
done
