#!/usr/bin/env bash
# Builds what .ci/h200-session25.sh runs: the base is the library at b068b25 (the
# twenty-fourth session's last commit), see .ci/h200-ab-bundle.sh.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
BASE=${BASE:-b068b25} HOLO_TESTS="handoff stream_contract dlpack topics defects kernel_author" \
  HOLO_EXAMPLES="device_array_handoff cudarc_interop" exec bash .ci/h200-ab-bundle.sh
