#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `bash .ci/h200-session28-bundle.sh` (the
# bundle at this checkout; in .gpu/base/ the library and benches at 0392768; and
# .gpu/proto/device_hop-proto, device_hop built with
# bench-logs/h100-2026-12-06-0652-session28/prefetch-prototype.patch). The
# twenty-eighth session's runs, most wanted first:
# 1. `warm`: the prefetch prototype, WARMS settings (default "off 24 16"; HOLO_WARM=N
#    prefetches the first N of the partition's hot lines after each fill and copy an
#    operator makes through `DeviceAccess`, "off" none), which runs first rotating by
#    turn, TURNS turns (default 12);
# 2. the hand-off rows of the new binary, ROUNDS rounds (default 4);
# 3. the fused hop before (0392768) and after, AB turns (default 6), every pair printed.
# `.ci/turns-summary.py` reads the logs. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
P=.gpu/proto/device_hop-proto
bash .ci/gpu-machine.sh | tee "$out/machine.log"
read -r -a warms <<< "${WARMS:-off 24 16}"
n=${#warms[@]}
for turn in $(seq 1 "${TURNS:-12}"); do
  for k in $(seq 0 $((n - 1))); do
    w=${warms[$(( (k + turn) % n ))]}
    if [ "$w" = off ]; then unset HOLO_WARM; else export HOLO_WARM=$w; fi
    echo "== fused turn $turn: warm=$w"
    HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 "$P" --bench 2>&1 \
      | grep -E "^fused|^  fused|^warm" | sort -u
  done
done 2>&1 | tee "$out/fused-warm.log"
unset HOLO_WARM
date -u
for round in $(seq 1 "${ROUNDS:-4}"); do
  echo "== handoff round $round: $(basename "$H")"; timeout 60 "$H" --bench | grep -E "^cuda"
done 2>&1 | tee "$out/handoff.log"
date -u
HOLO_BENCH_VERBOSE=1 bash .ci/h200-fused-ab.sh "${AB:-6}" "$D" | tee "$out/fused-ab.log"
date -u
