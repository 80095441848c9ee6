#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle (.ci/h200-bundle-targeted.sh):
# issue 17's fork scenarios (`device_hop fork`, three interleaved runs, each holo scenario
# beside the raw threaded baseline), then .ci/h200-perf.sh's three rounds of the benches
# whose targets sit near their noise, without its tests (the hand-off, device_hop with 31
# pairs, the in-partition host hop). HOLO_SKIP_PERF=1: the fork scenarios only.
export HOLO_REQUIRE_DEVICE=cuda
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1)
echo "== device_hop fork (HOLO_BENCH_RUNS=${HOLO_BENCH_RUNS:-3})"
HOLO_DEVICE=cuda timeout 300 $D fork
[ -n "${HOLO_SKIP_PERF:-}" ] || HOLO_SKIP_TESTS=1 bash .ci/h200-perf.sh
