#!/usr/bin/env bash
# Builds what .ci/h200-session28c.sh runs: the topics suite, device_array_handoff and the
# topics, device_hop and handoff benches at this checkout (.ci/h200-bundle-targeted.sh),
# and in .gpu/base/ the topics bench at BASE (default e32fbf3, the commit before the
# subscriber's idle wait changed), built in a worktree with its own target directory.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
base=${BASE:-e32fbf3}
HOLO_TESTS=topics HOLO_EXAMPLES=device_array_handoff HOLO_BENCHES="topics device_hop handoff" \
  bash .ci/h200-bundle-targeted.sh
rm -f .gpu/bin/holo_runtime-*
wt=/tmp/holo-base-$base; target=/tmp/holo-base-target-$base
git worktree remove --force "$wt" 2>/dev/null || true
git worktree add -q "$wt" "$base"
source .ci/pick.sh
mkdir -p .gpu/base
(cd "$wt" && CARGO_TARGET_DIR=$target cargo bench --no-run --message-format=json -p holo-runtime \
  --bench topics 2>/dev/null | pick bench topics) | while read -r exe; do cp "$exe" .gpu/base/topics-base; done
strip .gpu/base/*
! cmp -s .gpu/base/topics-base .gpu/bench/topics-* || { echo "base topics is the new binary" >&2; exit 1; }
git worktree remove --force "$wt"
du -sh .gpu
