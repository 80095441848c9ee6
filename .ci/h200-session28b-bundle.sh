#!/usr/bin/env bash
# Builds what .ci/h200-session28b.sh runs: issue 13's device suites, benches and examples
# at this checkout, with the CuPy test's extension, as .ci/h200-handoff.sh reads them;
# device_hop at this checkout and, in .gpu/base/, at 0392768 with its own bench sources
# (.ci/h200-ab-bundle.sh).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
BASE=${BASE:-0392768} BASE_BENCHES=base \
  HOLO_TESTS="handoff cuda_context dlpack dlpack_no_alloc topics" \
  HOLO_EXAMPLES="cudarc_interop dlpack_roundtrip device_array_handoff" \
  HOLO_BENCHES="dlpack topics" bash .ci/h200-ab-bundle.sh
cargo build --release -p holo-py
mkdir -p .gpu/py && cp target/release/libholo_py.so .gpu/py/holo_py.abi3.so && strip .gpu/py/holo_py.abi3.so
rm -f .gpu/base/handoff-base
du -sh .gpu
