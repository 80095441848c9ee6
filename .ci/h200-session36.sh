#!/usr/bin/env bash
# Run on the GPU machine from the repo root with the `device_hop` and `host_hop` benches
# in .gpu/bench (release, stripped):
#   source .ci/pick.sh; cargo bench -p holo-runtime --no-run --message-format=json \
#     --bench device_hop --bench host_hop | pick bench device_hop host_hop
# The thirty-sixth session's run, the library as at `67b4b1e` (the thirty-fifth session
# changed tests only): issue 12's host targets on the GPU host — the in-partition host hop
# six times with the bench's default pinning and the compile section (its four figures
# beside the plan's copy) — then the fused hop in six 7-pair runs pinned to CPU 2
# (.ci/fused-runs.sh) and issue 12's table once (`device_hop --bench`). Logs go to $OUT.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
lscpu | grep -iE "cache|^CPU\(s\)" >> "$out/machine.log"
H=$(ls .gpu/bench/host_hop-* | head -1)
D=$(ls .gpu/bench/device_hop-* | head -1)
{
  for run in 1 2 3 4 5 6; do echo "== in-partition, run $run"; date -u; timeout 60 "$H" --bench in-partition; done
} 2>&1 | tee "$out/host_hop.log"
{ echo "== compile"; date -u; timeout 240 "$H" --bench compile; date -u; } 2>&1 | tee "$out/compile.log"
export HOLO_DEVICE=cuda
{ echo "== fused hop, 7 pairs a run, pinned to CPU 2"; date -u; } | tee "$out/fused-runs.log"
bash .ci/fused-runs.sh "$D" 1 2 3 4 5 6 2>&1 | tee -a "$out/fused-runs.log"
echo "== device_hop --bench"; date -u
timeout 240 "$D" --bench 2>&1 | tee "$out/device_hop.log"
date -u
# The device tool brings back a limited number of files from a call: one archive of them all.
(cd "$out" && tar czf bench-logs.tgz --remove-files machine.log host_hop.log compile.log fused-runs.log device_hop.log)
