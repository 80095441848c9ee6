#!/usr/bin/env bash
# Builds what .ci/h200-session28.sh runs: device_hop and handoff at this checkout, and the
# base 0392768 (the twenty-sixth session's last commit) with its own bench sources; see
# .ci/h200-ab-bundle.sh. One small test binary and example keep the bundle's layout. The
# prefetch prototype (.gpu/proto/) is built by hand: apply
# bench-logs/h100-2026-12-06-0652-session28/prefetch-prototype.patch in a worktree, build
# device_hop there, strip it into .gpu/proto/device_hop-proto.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
BASE=${BASE:-0392768} BASE_BENCHES=base HOLO_TESTS=kernel_author \
  HOLO_EXAMPLES=device_array_handoff exec bash .ci/h200-ab-bundle.sh
