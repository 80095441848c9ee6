#!/usr/bin/env bash
# Builds what .ci/h200-session26.sh runs: the base is the library at 0bce933 (the
# twenty-fifth session's last commit), see .ci/h200-ab-bundle.sh.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
BASE=${BASE:-0bce933} HOLO_TESTS="handoff stream_contract topics defects kernel_author device_hot_path_no_alloc" \
  HOLO_EXAMPLES="device_array_handoff cudarc_interop" exec bash .ci/h200-ab-bundle.sh
