#!/usr/bin/env bash
# Builds what .ci/h200-session27.sh runs: the base is 0392768 (the twenty-sixth session's
# last commit) with its own bench sources, whose operators fill and copy through the
# backend's checked calls; see .ci/h200-ab-bundle.sh.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
BASE=${BASE:-0392768} BASE_BENCHES=base HOLO_BENCHES=device_ops \
  HOLO_TESTS="kernel_author device_hot_path_no_alloc stream_contract handoff defects" \
  HOLO_EXAMPLES="tensors_in_depth_cuda device_array_handoff" exec bash .ci/h200-ab-bundle.sh
