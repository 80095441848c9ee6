#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle built with
#   HOLO_TESTS="fork" HOLO_EXAMPLES="fork_streams" HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# (about 20 MB: no packing needed). The twentieth session's runs: `device_hop fork` three
# times at the issue's 1 µs source period, with the paced rows (issue 17; docs/STREAMS.md,
# "Pacing a source"), `fork-diag` once, five hand-off rounds (issue 13) and five rounds of
# device_hop's hops (issue 12's fused hop). Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
if [ "${1:-}" = paced ]; then
  echo "== device_hop fork-paced, eight runs"; HOLO_BENCH_RUNS=8 timeout 240 "$D" fork-paced | squeeze | tee "$out/fork-paced.log"
  date -u; exit 0
fi
if [ "${1:-}" = inflight ]; then
  echo "== device_hop fork-paced, six runs"; HOLO_BENCH_RUNS=6 timeout 200 "$D" fork-paced | squeeze | tee "$out/fork-paced.log"
  echo "== device_hop fork-diag"; timeout 120 "$D" fork-diag | tee "$out/fork-diag.log" | tail -14
  for round in 1 2 3; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
  for round in 1 2; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done | tee "$out/device_hop.log"
  for n in stream_contract fork pacing holo_runtime; do for b in .gpu/bin/$n-*; do echo "test $n: $(HOLO_REQUIRE_DEVICE=cuda timeout 100 "$b" --test-threads=1 2>&1 | grep 'test result')"; done; done
  date -u; exit 0
fi
echo "== device_hop fork, 1 µs, three runs"; HOLO_BENCH_RUNS=3 timeout 240 "$D" fork | squeeze | tee "$out/fork.log"
echo "== device_hop fork-diag"; timeout 120 "$D" fork-diag | tee "$out/fork-diag.log" | head -150
for round in 1 2 3 4 5; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
for round in 1 2 3 4 5; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done | tee "$out/device_hop.log"
for b in .gpu/bin/fork-*; do timeout 120 "$b" --test-threads=1 2>&1 | grep "test result"; done
date -u
# Second call (`bash .ci/h200-session20.sh paced`, bundle with HOLO_BENCHES=device_hop):
# the paced fork and its raw baselines, eight runs. Third call (`… inflight`, the first
# bundle: HOLO_TESTS="pacing stream_contract fork"): six runs of the paced rows with the
# in-flight ones, `fork-diag`, three hand-off and two device_hop rounds (the scheduler
# now marks each cross-partition input finished after an activation), and the
# stream_contract, fork and runtime unit tests on CUDA.
