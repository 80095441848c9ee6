#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle (.ci/h200-bundle-targeted.sh):
# issue 17's fork scenarios (`device_hop fork`, three interleaved runs, each holo scenario
# beside the raw threaded baseline), then three rounds of the benches whose targets sit
# near their noise (.ci/h200-perf.sh without its tests: the hand-off, device_hop with 31
# pairs, the in-partition host hop).
export HOLO_REQUIRE_DEVICE=cuda HOLO_BENCH_PAIRS=${HOLO_BENCH_PAIRS:-31}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1)
echo "== device_hop fork (HOLO_BENCH_RUNS=${HOLO_BENCH_RUNS:-3})"
HOLO_DEVICE=cuda timeout 300 $D fork
[ -n "${HOLO_SKIP_PERF:-}" ] || {
  H=$(ls .gpu/bench/handoff-* | head -1); O=$(ls .gpu/bench/host_hop-* | head -1)
  for round in 1 2 3; do
    echo "== round $round: handoff"; date -u; HOLO_DEVICE=cuda $H --bench | grep -E "^cuda"
    echo "== round $round: device_hop"; date -u; HOLO_DEVICE=cuda $D --bench | grep -vE "^  "
    echo "== round $round: host_hop in-partition"; date -u; $O --bench in-partition
  done
}
date -u
