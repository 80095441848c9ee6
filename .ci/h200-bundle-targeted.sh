#!/usr/bin/env bash
# Builds a smaller .gpu/ than .ci/h200-bundle.sh, for .ci/h200-session.sh,
# .ci/h200-opencl.sh and .ci/h200-soak.sh: only the device test binaries, the device
# examples and the device benches (release; the benches with holo-runtime alone, so that
# holo-tests' `tracing` feature is not unified into them), stripped. All of them no longer
# fit the device tool's 64 MiB (with the tracked tree, about 4 MB, counted too): HOLO_TESTS, HOLO_EXAMPLES and HOLO_BENCHES (space-separated
# names) pick what a run needs; for .ci/h200-issue17.sh, for example:
#   HOLO_TESTS="stream_contract handoff defects device_hot_path_no_alloc fork worker_placement" \
#   HOLO_EXAMPLES=fork_streams HOLO_BENCHES="device_hop handoff host_hop" bash .ci/h200-bundle-targeted.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rm -rf .gpu && mkdir -p .gpu/bin .gpu/bench .gpu/examples
source .ci/pick.sh
tests="${HOLO_TESTS:-placement_api stream_contract handoff topics opencl receive_in_place device_hot_path_no_alloc cuda_context dlpack kernel_author fault_injection soak defects session_host}"
args=(); for t in $tests; do args+=(--test "$t"); done
cargo test --release --no-run --message-format=json -p holo-tests "${args[@]}" 2>/dev/null \
  | pick test $tests | while read -r exe; do cp "$exe" .gpu/bin/; done
cargo test --release --no-run --message-format=json -p holo-runtime --lib 2>/dev/null \
  | pick lib holo_runtime | while read -r exe; do cp "$exe" .gpu/bin/; done
benches="${HOLO_BENCHES:-device_hop handoff opencl_hop host_hop}"
bargs=(); for b in $benches; do bargs+=(--bench "$b"); done
cargo bench --no-run --message-format=json -p holo-runtime "${bargs[@]}" 2>/dev/null \
  | pick bench $benches | while read -r exe; do cp "$exe" .gpu/bench/; done
examples="${HOLO_EXAMPLES:-device_array_opencl tensors_in_depth_cuda fork_streams cudarc_interop device_array_handoff}"
eargs=(); for e in $examples; do eargs+=(--example "$e"); done
cargo build --release -p holo-examples "${eargs[@]}"
for e in $examples; do cp "target/release/examples/$e" .gpu/examples/; done
strip .gpu/bin/* .gpu/bench/* .gpu/examples/*
du -sh .gpu
size=$(du -sb .gpu | cut -f1)
[ "$size" -le $((64 << 20)) ] || echo "warning: .gpu/ is $size bytes, over the device tool's 64 MiB: narrow HOLO_TESTS/HOLO_EXAMPLES/HOLO_BENCHES" >&2
