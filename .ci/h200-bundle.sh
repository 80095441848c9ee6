#!/usr/bin/env bash
# Builds .gpu/ for .ci/h200-validate.sh (BENCHMARKS.md): the test and example binaries
# through ../shared/tools/gpu-bundle, then the benches again with holo-runtime alone —
# built together with holo-tests, cargo unifies holo-tests' `tracing` feature into them,
# and a bench with tracing compiled in measures the feature's cost, not holo's (the
# in-partition hop: 115.6 against 77–81 ns on the H200, 2026-12-03). Then leaves out what
# needs no GPU, to stay under the device tool's 64 MiB.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
../shared/tools/gpu-bundle -p holo-runtime -p holo-tests -p holo-examples
rm -f .gpu/bench/*
cargo bench -p holo-runtime --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"] \
            and m["target"]["name"] in ("device_hop", "device_ops", "host_hop", "handoff", "dlpack", "topics", "opencl_hop"):
        print(m["executable"])
' | while read -r exe; do cp "$exe" .gpu/bench/ && strip ".gpu/bench/$(basename "$exe")"; done
# The CuPy test's extension module (holo-py/tests/test_cupy.py runs it on the GPU machine).
cargo build --release -p holo-py
mkdir -p .gpu/py && cp target/release/libholo_py.so .gpu/py/holo_py.abi3.so && strip .gpu/py/holo_py.abi3.so
cd .gpu
rm -f bin/cli-* bin/holo_examples-* bin/holo_tests-* bin/params_* bin/app_* bin/macros_* \
  bin/operator_hygiene-* bin/compile_handwritten_specs-* bin/compile_diagnostics-* \
  bin/diagnostic_codes-* examples/derived_tensor_pool_capacity examples/params \
  examples/rate_aware_ports
du -sh .
