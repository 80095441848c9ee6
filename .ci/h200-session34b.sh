#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle of the library's unit tests,
# `ipc_publish`, `ipc_import_no_alloc` and `ipc_device` in .gpu/bin (release, stripped) and
# the peer they spawn in .gpu/peer/ipc_peer (cargo build --release -p holo-tests --bin
# ipc_peer): the thirty-fourth session's seat change (`Unobserved`, ipc/publish.rs) on
# CUDA, every binary with HOLO_REQUIRE_DEVICE=cuda, the allocation-free one three times.
# Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda HOLO_IPC_PEER=$PWD/.gpu/peer/ipc_peer
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in .gpu/bin/*; do
  n=$(basename "$b" | sed 's/-[0-9a-f]*$//')
  runs=1; [ "$n" = ipc_import_no_alloc ] && runs=3
  for r in $(seq $runs); do
    timeout 150 "$b" --test-threads=1 > "$out/test-$n-$r.log" 2>&1
    echo "test $n run $r: rc $? $(grep 'test result' "$out/test-$n-$r.log" | tail -1) $(grep -h 'allocations over' "$out/test-$n-$r.log")"
  done
done | tee "$out/tests.log"
date -u
! grep -q "rc [1-9]" "$out/tests.log"
