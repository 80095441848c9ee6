#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle built with
#   HOLO_TESTS="pacing stream_contract fork" HOLO_EXAMPLES="fork_streams" HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# and the benches from before the change copied (stripped) to .gpu/base/device_hop-base
# and .gpu/base/handoff-base. The twenty-third session's runs, most wanted first (what a
# timeout cuts is last). Default: `device_hop fork-paced` before and after the idle loop's
# change (partitions re-check for 4 µs between yields), alternating, two runs a turn; three
# hand-off rounds; the pacing, fork and stream_contract tests on CUDA. `hops`: one
# device_hop round before and after, alternating. `h200`, `third`: the second and third
# leases (below); `next`: for the next lease. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
if [ "${1:-}" = hops ]; then
  for bin in .gpu/base/device_hop-base "$D"; do
    echo "== device_hop: $(basename "$bin")"; HOLO_BENCH_PAIRS=21 timeout 140 "$bin" --bench | grep -vE "^  "
  done | tee "$out/device_hop-ab.log"
  date -u; exit 0
fi
if [ "${1:-}" = h200 ]; then
  # The H200 lease: nine fork-paced runs of each binary (three turns of three,
  # alternating), three hand-off rounds, two device_hop rounds of each.
  for turn in 1 2 3; do for bin in .gpu/base/device_hop-base "$D"; do
    echo "== fork-paced turn $turn: $(basename "$bin")"; HOLO_BENCH_RUNS=3 timeout 90 "$bin" fork-paced | squeeze
  done; done | tee "$out/fork-paced-ab.log"
  for round in 1 2 3; do echo "== handoff round $round"; timeout 40 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
  for round in 1 2; do for bin in .gpu/base/device_hop-base "$D"; do
    echo "== device_hop round $round: $(basename "$bin")"; HOLO_BENCH_PAIRS=21 timeout 100 "$bin" --bench | grep -vE "^  "
  done; done | tee "$out/device_hop-ab.log"
  date -u; exit 0
fi
if [ "${1:-}" = next ]; then
  # For the next lease (not run in the twenty-third session), after a bundle with
  #   HOLO_TESTS="handoff dlpack defects topics" HOLO_BENCHES="device_hop handoff"
  # the hand-off suites on CUDA (DeviceArray's drop split at 86f7fc1 has not run on a GPU),
  # three hand-off rounds against .gpu/base/handoff-base alternating, and `fork-diag`
  # (driver time per call kind and thread: which part of the slower sink's receive differs).
  for n in handoff dlpack defects topics; do for b in .gpu/bin/$n-*; do echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep 'test result')"; done; done | tee "$out/tests.log"
  for round in 1 2 3; do for bin in .gpu/base/handoff-base "$H"; do
    [ -x "$bin" ] || continue
    echo "== handoff round $round: $(basename "$bin")"; timeout 40 "$bin" --bench | grep -E "^cuda"
  done; done | tee "$out/handoff-ab.log"
  echo "== fork-diag"; timeout 200 "$D" fork-diag | tee "$out/fork-diag.log"
  date -u; exit 0
fi
if [ "${1:-}" = third ]; then
  # The third lease: ten fork-paced runs of the new binary (its rows print the sinks' p50
  # ratio), then the fused hop before and after alternating (two turns of 21 pairs; the
  # base runs every scenario, the new one the fused hop alone), three hand-off rounds.
  echo "== fork-paced, ten runs: $(basename "$D")"; HOLO_BENCH_RUNS=10 timeout 90 "$D" fork-paced | squeeze | tee "$out/fork-paced-new.log"
  for turn in 1 2; do for bin in .gpu/base/device_hop-base "$D"; do
    echo "== device_hop turn $turn: $(basename "$bin")"; HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=21 timeout 60 "$bin" --bench | grep -vE "^  "
  done; done | tee "$out/fused-ab.log"
  for round in 1 2 3; do echo "== handoff round $round"; timeout 30 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
  date -u; exit 0
fi
for turn in 1 2 3; do for bin in .gpu/base/device_hop-base "$D"; do
  echo "== fork-paced turn $turn: $(basename "$bin")"; HOLO_BENCH_RUNS=2 timeout 60 "$bin" fork-paced | squeeze
done; done | tee "$out/fork-paced-ab.log"
date -u
for round in 1 2 3; do echo "== handoff round $round"; timeout 40 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
for n in pacing fork stream_contract; do for b in .gpu/bin/$n-*; do echo "test $n: $(timeout 60 "$b" --test-threads=1 2>&1 | grep 'test result')"; done; done | tee "$out/tests.log"
timeout 30 .gpu/examples/fork_streams --frames 1000 2>&1 | tail -3 | tee "$out/fork_streams.log"
date -u
