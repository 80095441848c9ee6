#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle built with
#   HOLO_TESTS="pacing stream_contract fork" HOLO_EXAMPLES="fork_streams" HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# The twenty-first session's runs (issue 17: where the paced fork's ResourceExhausted
# comes from). `diag` (default): the machine's CPUs, `device_hop fork-diag` (each
# thread's driver time, its calls over 20 µs and its gaps over 20 µs between calls) and
# three runs of `device_hop fork-paced`; first with .gpu/base/device_hop-base if present (the
# bench built before a change: copy it there after building the bundle). `paced`: six runs
# of `fork-paced` with each binary, alternating in rounds of two. `pin`: six runs of
# `fork-paced` unpinned and six with HOLO_BENCH_FORK_CPUS (three cores of socket 0). `check`: six runs of `fork-paced`, three hand-off
# rounds and two device_hop rounds, and the stream_contract, fork, pacing and runtime unit
# tests on CUDA. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
if [ "${1:-diag}" = diag ]; then
  echo "nproc $(nproc); isolated '$(cat /sys/devices/system/cpu/isolated 2>/dev/null)'; affinity $(taskset -pc $$ 2>/dev/null | sed 's/.*: //')"
  # .gpu/base/device_hop-base, when there: the same bench built before a change, run first.
  for bin in .gpu/base/device_hop-base "$D"; do
    [ -x "$bin" ] || continue; tag=$(basename "$bin")
    echo "== $tag fork-diag"; timeout 150 "$bin" fork-diag | tee "$out/fork-diag-$tag.log" | grep -A6 "paced"
    echo "== $tag fork-paced, three runs"; HOLO_BENCH_RUNS=3 timeout 150 "$bin" fork-paced | squeeze | tee "$out/fork-paced-$tag.log"
  done
  date -u; exit 0
fi
if [ "${1:-}" = pin ]; then
  # The fork paced on in_flight with its threads unpinned and pinned (HOLO_BENCH_FORK_CPUS):
  # the source and the two sinks on three distinct cores of socket 0, CPU 0 left out.
  lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|NUMA)"; nvidia-smi topo -m 2>/dev/null | head -3
  cpus=$(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | awk -F, '$3==0 && $1>0 && !seen[$2]++ {print $1}' | head -3 | paste -sd,)
  echo "pinned CPUs: $cpus"
  for round in 1 2 3; do
    echo "== round $round, unpinned"; HOLO_BENCH_RUNS=2 timeout 100 "$D" fork-paced | squeeze | tee -a "$out/fork-paced-unpinned.log" | grep -E "^holo|^raw threaded, 2 consumers, paced on|^-- "
    echo "== round $round, pinned"; HOLO_BENCH_FORK_CPUS=$cpus HOLO_BENCH_RUNS=2 timeout 100 "$D" fork-paced | squeeze | tee -a "$out/fork-paced-pinned.log" | grep -E "^holo|^raw threaded, 2 consumers, paced on|^-- |latency on"
  done
  date -u; exit 0
fi
if [ "${1:-}" = paced ]; then
  # Six runs of fork-paced with each binary, alternating: the base (before the change)
  # and the bundle's.
  for round in 1 2 3; do for bin in .gpu/base/device_hop-base "$D"; do
    [ -x "$bin" ] || continue; tag=$(basename "$bin")
    echo "== round $round: $tag fork-paced, two runs"; HOLO_BENCH_RUNS=2 timeout 100 "$bin" fork-paced | squeeze | tee -a "$out/fork-paced-$tag.log" | grep -E "^holo|^-- "
  done; done
  date -u; exit 0
fi
echo "== device_hop fork-paced, six runs"; HOLO_BENCH_RUNS=6 timeout 200 "$D" fork-paced | squeeze | tee "$out/fork-paced.log"
for round in 1 2 3; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
for round in 1 2; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done | tee "$out/device_hop.log"
for n in stream_contract fork pacing holo_runtime; do for b in .gpu/bin/$n-*; do echo "test $n: $(HOLO_REQUIRE_DEVICE=cuda timeout 100 "$b" --test-threads=1 2>&1 | grep 'test result')"; done; done
date -u
