#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle built with
#   HOLO_TESTS="handoff stream_contract dlpack topics defects kernel_author" HOLO_EXAMPLES="device_array_handoff cudarc_interop" \
#   HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# and the base binaries in .gpu/base/: handoff-base (the library at 7208b1f, the
# twenty-third session's last commit, with this session's hand-off bench source, so that
# both print the same rows) and device_hop-base (7208b1f as it was). The twenty-fourth
# session's runs, most wanted first (what a timeout cuts is last): the changed paths'
# suites on CUDA, the hand-off before and after alternating (three rounds), the fused hop
# before and after alternating (three turns of 31 pairs), the two hand-off examples, one
# whole device_hop round of the new binary. `ab`: a second call's before/after rounds
# (below). Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
if [ "${1:-}" = ab ]; then
  # The second call of a lease (the same bundle): the fused hop before and after in six
  # alternating turns of 31 pairs, five hand-off rounds alternating, and two whole
  # device_hop rounds of each binary alternating.
  for turn in 1 2 3 4 5 6; do for bin in .gpu/base/device_hop-base "$D"; do
    echo "== fused turn $turn: $(basename "$bin")"; HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 60 "$bin" --bench | grep "^fused"
  done; done | tee "$out/ab-fused.log"
  for round in 1 2 3 4 5; do for bin in .gpu/base/handoff-base "$H"; do
    echo "== handoff round $round: $(basename "$bin")"; timeout 60 "$bin" --bench | grep -E "adopted once  |two events|backend trait"
  done; done | tee "$out/ab-handoff.log"
  for turn in 1 2; do for bin in .gpu/base/device_hop-base "$D"; do
    echo "== all turn $turn: $(basename "$bin")"; HOLO_BENCH_PAIRS=21 timeout 100 "$bin" --bench | grep -E "^(fenced|fused|4-op|1→2)"
  done; done | tee "$out/ab-device_hop.log"
  date -u; exit 0
fi
for n in handoff stream_contract dlpack topics defects kernel_author; do for b in .gpu/bin/$n-*; do
  echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done; done | tee "$out/tests.log"
for round in 1 2 3; do for bin in .gpu/base/handoff-base "$H"; do
  echo "== handoff round $round: $(basename "$bin")"; timeout 60 "$bin" --bench | grep -E "^cuda"
done; done | tee "$out/handoff-ab.log"
date -u
for turn in 1 2 3; do for bin in .gpu/base/device_hop-base "$D"; do
  echo "== fused turn $turn: $(basename "$bin")"; HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 "$bin" --bench | grep -vE "^  "
done; done | tee "$out/fused-ab.log"
date -u
for e in device_array_handoff cudarc_interop; do
  echo "== example $e"; timeout 30 .gpu/examples/$e 2>&1 | tail -4
done | tee "$out/examples.log"
echo "== device_hop, every scenario: $(basename "$D")"; HOLO_BENCH_PAIRS=21 timeout 120 "$D" --bench | grep -vE "^  " | tee "$out/device_hop.log"
date -u
