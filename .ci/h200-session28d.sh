#!/usr/bin/env bash
# Run on the GPU machine from the repo root with .gpu/proto/device_hop-proto: device_hop
# at 77eb449 with bench-logs/h100-2026-12-06-0652-session28/prefetch-prototype-7c56594.patch
# (the prefetch prototype, rebased onto the idle wait's change) applied, built and
# stripped by hand. The prototype once more, now measured pinned to one CPU (taskset -c
# CPU, default 2) with the order-balanced ratio: HOLO_WARM unset and set to each of WARMS
# (default "8 16"), which runs first rotating by turn, TURNS turns (default 6), every pair
# printed. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
P=.gpu/proto/device_hop-proto
bash .ci/gpu-machine.sh | tee "$out/machine.log"
read -r -a warms <<< "off ${WARMS:-8 16}"
n=${#warms[@]}
for turn in $(seq 1 "${TURNS:-6}"); do
  for k in $(seq 0 $((n - 1))); do
    w=${warms[$(( (k + turn) % n ))]}
    if [ "$w" = off ]; then unset HOLO_WARM; else export HOLO_WARM=$w; fi
    echo "== fused turn $turn: pinned-warm=$w"
    HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 taskset -c "${CPU:-2}" "$P" --bench 2>/dev/null \
      | grep -E "^fused|^  fused"
  done
done 2>&1 | tee "$out/fused-warm-pinned.log"
date -u
