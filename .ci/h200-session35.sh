#!/usr/bin/env bash
# Run on the GPU machine from the repo root after the bundle of .ci/h200-session34b.sh
# (the library's unit tests, `ipc_publish`, `ipc_import_no_alloc` and `ipc_device` in
# .gpu/bin, the peer in .gpu/peer/ipc_peer) plus the `device_hop` and `host_hop` benches in
# .gpu/bench (release, stripped). The thirty-fifth session's run: the thirty-fourth
# session's seat change and descriptor stamp on CUDA (.ci/h200-session34b.sh), then the
# in-partition host hop three times with the bench's default pinning, the fused hop in six
# 7-pair runs pinned to CPU 2 (.ci/fused-runs.sh), and issue 12's table once
# (`device_hop --bench`). PART=tests or PART=bench runs one half. Logs go to $OUT.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
status=0
if [ "${PART:-all}" != bench ]; then
  bash .ci/h200-session34b.sh || status=1
fi
[ "${PART:-all}" = tests ] && exit $status
H=$(ls .gpu/bench/host_hop-* | head -1)
D=$(ls .gpu/bench/device_hop-* | head -1)
{
  for run in 1 2 3; do echo "== in-partition, run $run"; date -u; timeout 60 "$H" --bench in-partition; done
} 2>&1 | tee "$out/host_hop.log"
export HOLO_DEVICE=cuda
echo "== fused hop, 7 pairs a run, pinned to CPU 2"; date -u
bash .ci/fused-runs.sh "$D" 1 2 3 4 5 6 2>&1 | tee "$out/fused-runs.log"
echo "== device_hop --bench"; date -u
timeout 240 "$D" --bench 2>&1 | tee "$out/device_hop.log"
date -u
exit $status
