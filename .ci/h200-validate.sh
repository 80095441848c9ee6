#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-bundle.sh (BENCHMARKS.md).
# Final H200 validation, most needed first: the device tests, device_hop, the CUDA examples
# under compute-sanitizer, then every other test binary, then a second device_hop.
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
t() {
  n=$(basename "$1"); timeout 120 "$1" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
}
for n in stream_contract device_hot_path_no_alloc device_no_alloc device_backend session_host holo_runtime kernel_launch defects kernel_author session_spawn_failure; do t .gpu/bin/$n-*; done
B=$(ls .gpu/bench/device_hop-* | head -1)
echo "== device_hop 1"; date -u; HOLO_DEVICE=cuda HOLO_BENCH_VERBOSE=1 $B --bench
E=.gpu/examples; CS=/usr/local/cuda/bin/compute-sanitizer
for ex in tensors_in_depth_cuda fork_streams; do
  echo "== example $ex"; HOLO_DEVICE=cuda timeout 60 $E/$ex --frames 1000 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
  for tool in memcheck racecheck synccheck; do
    echo "== sanitizer $tool $ex: $(HOLO_DEVICE=cuda timeout 60 $CS --tool $tool $E/$ex --frames 30 2>&1 | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)"
  done
done
for b in .gpu/bin/*; do case $(basename $b) in stream_contract-*|device_hot_path_no_alloc-*|device_no_alloc-*|device_backend-*|session_host-*|holo_runtime-*|kernel_launch-*|defects-*|kernel_author-*|session_spawn_failure-*) ;; *) t $b ;; esac; done
echo "== device_hop 2"; date -u; HOLO_DEVICE=cuda HOLO_BENCH_VERBOSE=1 $B --bench
echo "== host_hop"; date -u; $(ls .gpu/bench/host_hop-* | head -1) --bench
date -u
exit $status
