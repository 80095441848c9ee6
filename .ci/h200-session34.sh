#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS="frames topics ipc_device ipc_publish ipc_sessions" HOLO_EXAMPLES=tensors_in_depth_cuda \
#   HOLO_BENCHES=host_hop bash .ci/h200-bundle-targeted.sh
# The thirty-fourth session's run: the bracketed clock pairs (capture and publish times
# within a session and across processes) on CUDA — the library's unit tests and the
# suites that carry frame times in and out of processes, with HOLO_REQUIRE_DEVICE=cuda
# (.ci/h200-suites.sh) — then host_hop's in-partition hop on a GPU host, unpinned twice and
# pinned to one CPU once. Logs go to $OUT. The ipc suites spawn the peer process: build it
# too (cargo build --release -p holo-tests --bin ipc_peer; strip; .gpu/peer/ipc_peer).
# PART=ipc runs the ipc suites alone.
export HOLO_IPC_PEER=$PWD/.gpu/peer/ipc_peer
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
status=0
if [ "${PART:-all}" = ipc ]; then
  export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
  for b in .gpu/bin/ipc_*; do
    n=$(basename "$b" | sed 's/-[0-9a-f]*$//')
    timeout 150 "$b" --test-threads=1 > "$out/test-$n.log" 2>&1
    echo "test $n: rc $? $(grep 'test result' "$out/test-$n.log" | tail -1)"
  done | tee "$out/tests.log"
  ! grep -q "rc [1-9]" "$out/tests.log"; exit $?
fi
bash .ci/h200-suites.sh || status=1
grep -q "rc [1-9]" "$out/tests.log" "$out/examples.log" && status=1
H=$(ls .gpu/bench/host_hop-* | head -1)
{
  for run in 1 2; do echo "== in-partition, unpinned, run $run"; date -u; timeout 60 "$H" --bench in-partition; done
  echo "== in-partition, pinned to CPU 2"; date -u; timeout 60 taskset -c 2 "$H" --bench in-partition
  date -u
} 2>&1 | tee "$out/host_hop.log"
exit $status
