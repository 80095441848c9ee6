#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle (.ci/h200-bundle.sh or
# .ci/h200-bundle-targeted.sh): the
# hand-off's device tests, then three interleaved rounds of the benches whose targets sit
# near their noise (issue 12's fused hop and in-partition host hop, issue 13's hand-off).
# HOLO_BENCH_PAIRS (device_hop's interleaved pairs) defaults to 31 here.
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1 HOLO_BENCH_PAIRS=${HOLO_BENCH_PAIRS:-31}
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
t() {
  n=$(basename "$1"); timeout 120 "$1" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
}
# HOLO_SKIP_TESTS=1: the bench rounds only (as .ci/h200-fork.sh runs them).
[ -n "${HOLO_SKIP_TESTS:-}" ] || for n in handoff cuda_context dlpack topics stream_contract holo_runtime ${EXTRA_TESTS:-}; do
  for b in .gpu/bin/$n-*; do [ -x "$b" ] && t "$b"; done
done
H=$(ls .gpu/bench/handoff-* | head -1); D=$(ls .gpu/bench/device_hop-* | head -1); O=$(ls .gpu/bench/host_hop-* | head -1)
for round in 1 2 3; do
  echo "== round $round: handoff"; date -u; HOLO_DEVICE=cuda $H --bench | grep -E "^cuda"
  echo "== round $round: device_hop"; date -u; HOLO_DEVICE=cuda $D --bench | grep -vE "^  "
  echo "== round $round: host_hop in-partition (both sides pinned to one CPU)"; date -u; $O --bench in-partition
  echo "== round $round: host_hop in-partition, unpinned (HOLO_BENCH_NO_PIN=1, the method before the fifteenth session)"; HOLO_BENCH_NO_PIN=1 $O --bench in-partition
done
date -u
exit $status
