#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `bash .ci/h200-session25-bundle.sh`, which
# builds the bundle, as
#   HOLO_TESTS="handoff stream_contract dlpack topics defects kernel_author" HOLO_EXAMPLES="device_array_handoff cudarc_interop" \
#   HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# and the base binaries in .gpu/base/: handoff-base and device_hop-base (the library at
# b068b25, the twenty-fourth session's last commit, with this session's bench sources, so
# that both print the same rows and both have `handoff perf`). The twenty-fifth session's
# runs, most wanted first (what a timeout cuts is last): the machine's CPU and the GPU's
# CPU affinity; `handoff perf` (the CPU's own counters per hand-off beside the raw pair)
# before and after, alternating; the hand-off rows before and after, alternating;
# `device_hop perf` (the same counters per fused-hop and chain frame, holo against raw);
# then the changed path's suites on CUDA; the fused hop before and after; the two hand-off
# examples; `handoff perf` pinned to two CPUs.
# `handoff`: the perf and hand-off rounds only; `suites`: everything else; no argument: all.
# Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  grep -m1 "model name" /proc/cpuinfo; cat /proc/sys/kernel/perf_event_paranoid
  nvidia-smi topo -m 2>&1 | head -6
} | tee "$out/machine.log"
part=${1:-all}
if [ "$part" != suites ]; then
for round in 1 2 3; do for bin in .gpu/base/handoff-base "$H"; do
  echo "== handoff perf round $round: $(basename "$bin")"; HOLO_BENCH_BATCHES=21 timeout 60 "$bin" perf | grep -E "^cuda"
done; done | tee "$out/handoff-perf.log"
date -u
for round in 1 2 3 4; do for bin in .gpu/base/handoff-base "$H"; do
  echo "== handoff round $round: $(basename "$bin")"; timeout 60 "$bin" --bench | grep -E "^cuda"
done; done | tee "$out/handoff-ab.log"
date -u
echo "== device_hop perf: $(basename "$D")" | tee "$out/device_hop-perf.log"
HOLO_BENCH_PAIRS=9 timeout 120 "$D" perf 2>&1 | tee -a "$out/device_hop-perf.log"
date -u
[ "$part" = handoff ] && exit 0
fi
for n in handoff stream_contract dlpack topics defects kernel_author; do for b in .gpu/bin/$n-*; do
  echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done; done | tee "$out/tests.log"
for turn in 1 2 3; do for bin in .gpu/base/device_hop-base "$D"; do
  echo "== fused turn $turn: $(basename "$bin")"; HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 "$bin" --bench | grep -E "^fused"
done; done | tee "$out/fused-ab.log"
date -u
for e in device_array_handoff cudarc_interop; do
  echo "== example $e"; timeout 30 .gpu/examples/$e 2>&1 | tail -4
done | tee "$out/examples.log"
date -u
# Pinned: the new binary's perf rows on two CPUs, to see whether the raw pair's two speeds
# follow the CPU the bench runs on.
for cpu in 2 $(( $(nproc) - 2 )); do
  echo "== handoff perf pinned to CPU $cpu"; HOLO_BENCH_BATCHES=21 timeout 60 taskset -c "$cpu" "$H" perf | grep -E "^cuda"
done | tee "$out/handoff-perf-pinned.log"
date -u

