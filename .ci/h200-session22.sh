#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle built with
#   HOLO_TESTS="pacing stream_contract fork" HOLO_EXAMPLES="fork_streams" HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# The twenty-second session's runs, most wanted first (what a timeout cuts is last):
# three hand-off rounds (with the rows that split its gap: the raw pair on holo's own
# events, and through the backend trait), six runs of `device_hop fork-paced` (the fork
# paced on in_flight and on in_use), the stream_contract, fork, pacing and runtime unit
# tests on CUDA, then two device_hop rounds. `handoff`: the hand-off before and after a
# change, alternating (below); `hops`: device_hop before and after a change. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
if [ "${1:-}" = hops ]; then
  # device_hop before and after a change, alternating in one lease: .gpu/base/device_hop-base
  # (built before it) and the bundle's; three hand-off rounds; three fork-paced runs.
  for round in 1 2; do for bin in .gpu/base/device_hop-base "$D"; do
    [ -x "$bin" ] || continue
    echo "== device_hop round $round: $(basename "$bin")"; HOLO_BENCH_PAIRS=31 timeout 150 "$bin" --bench | grep -vE "^  "
  done; done | tee "$out/device_hop-ab.log"
  for round in 1 2 3; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
  echo "== device_hop fork-paced, three runs"; HOLO_BENCH_RUNS=3 timeout 120 "$D" fork-paced | squeeze | tee "$out/fork-paced.log"
  date -u; exit 0
fi
if [ "${1:-}" = handoff ]; then
  # The hand-off before and after a change, alternating in one lease: .gpu/base/handoff-base
  # (built before it; copy it there after building the bundle) and the bundle's; then the
  # handoff tests on CUDA, two device_hop rounds and three fork-paced runs.
  for round in 1 2 3 4; do for bin in .gpu/base/handoff-base "$H"; do
    [ -x "$bin" ] || continue
    echo "== handoff round $round: $(basename "$bin")"; timeout 60 "$bin" --bench | grep -E "^cuda"
  done; done | tee "$out/handoff-ab.log"
  for n in handoff; do for b in .gpu/bin/$n-*; do echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep 'test result')"; done; done | tee "$out/tests.log"
  for round in 1 2; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done | tee "$out/device_hop.log"
  echo "== device_hop fork-paced, three runs"; HOLO_BENCH_RUNS=3 timeout 120 "$D" fork-paced | squeeze | tee "$out/fork-paced.log"
  date -u; exit 0
fi
for round in 1 2 3; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
echo "== device_hop fork-paced, six runs"; HOLO_BENCH_RUNS=6 timeout 200 "$D" fork-paced | squeeze | tee "$out/fork-paced.log"
for n in stream_contract fork pacing holo_runtime; do for b in .gpu/bin/$n-*; do echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep 'test result')"; done; done | tee "$out/tests.log"
for round in 1 2; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done | tee "$out/device_hop.log"
date -u
