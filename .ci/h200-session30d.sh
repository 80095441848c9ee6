#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS=device_hot_path_no_alloc HOLO_EXAMPLES=tensors_in_depth_cuda HOLO_BENCHES="device_hop host_hop" \
#     bash .ci/h200-bundle-targeted.sh
# Issue 12's performance table at this checkout: every device_hop scenario twice (fenced,
# fused, chain, fork, beside their raw baselines) and host_hop (the in-partition host hop
# against crossbeam, 0 allocations a frame). Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
D=$(ls .gpu/bench/device_hop-* | head -1)
H=$(ls .gpu/bench/host_hop-* | head -1)
for r in 1 2; do
  echo "== device_hop run $r"; HOLO_DEVICE=cuda timeout 240 "$D" --bench 2>&1
done 2>&1 | tee "$out/device_hop.log"
echo "== host_hop"; for s in in-partition cross-partition; do timeout 240 "$H" --bench "$s" 2>&1; done | tee "$out/host_hop.log"
for b in .gpu/bin/*; do echo "test $(basename "$b"): $(HOLO_DEVICE=cuda timeout 120 "$b" --test-threads=1 2>&1 | grep -E "test result" | head -2)"; done | tee "$out/tests.log"
echo "== example tensors_in_depth_cuda"; HOLO_DEVICE=cuda timeout 60 .gpu/examples/tensors_in_depth_cuda --frames 1000 2>&1 | tail -8 | tee "$out/example.log"
date -u
