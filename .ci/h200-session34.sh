#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS="frames topics ipc_device ipc_publish ipc_sessions" HOLO_EXAMPLES=tensors_in_depth_cuda \
#   HOLO_BENCHES=host_hop bash .ci/h200-bundle-targeted.sh
# The thirty-fourth session's run: the bracketed clock pairs (capture and publish times
# within a session and across processes) on CUDA — the library's unit tests and the
# suites that carry frame times in and out of processes, with HOLO_REQUIRE_DEVICE=cuda
# (.ci/h200-suites.sh) — then host_hop's in-partition hop on a GPU host, unpinned twice and
# pinned to one CPU once. Logs go to $OUT.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
status=0
bash .ci/h200-suites.sh || status=1
grep -q "rc [1-9]" "$out/tests.log" "$out/examples.log" && status=1
H=$(ls .gpu/bench/host_hop-* | head -1)
{
  for run in 1 2; do echo "== in-partition, unpinned, run $run"; date -u; timeout 60 "$H" --bench in-partition; done
  echo "== in-partition, pinned to CPU 2"; date -u; timeout 60 taskset -c 2 "$H" --bench in-partition
  date -u
} 2>&1 | tee "$out/host_hop.log"
exit $status
