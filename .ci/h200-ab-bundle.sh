#!/usr/bin/env bash
# Builds a before/after bundle: the targeted bundle (.ci/h200-bundle-targeted.sh, with
# HOLO_TESTS, HOLO_EXAMPLES and HOLO_BENCHES as given) and, in .gpu/base/, the library at
# BASE built with this checkout's bench sources, Cargo.toml and Cargo.lock, so that both
# binaries print the same rows: handoff-base and device_hop-base. The base is built in a
# worktree with a target directory of its own (a shared target/ once made cargo reuse
# stale binaries), and checked to differ from the new binary. The session scripts
# (.ci/h200-session25-bundle.sh, .ci/h200-session26-bundle.sh) set what they need.
# BASE_BENCHES=base keeps the base's own bench sources instead (when the benches now use
# an API the base does not have); HOLO_BENCHES adds benches to the bundle (device_hop and
# handoff are always in it).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
base=${BASE:?BASE: the commit to build as the base}
HOLO_BENCHES="device_hop handoff ${HOLO_BENCHES:-}" bash .ci/h200-bundle-targeted.sh
rm -f .gpu/bin/holo_runtime-*
wt=/tmp/holo-base-$base; target=/tmp/holo-base-target-$base
git worktree remove --force "$wt" 2>/dev/null || true
git worktree add -q "$wt" "$base"
if [ "${BASE_BENCHES:-head}" != base ]; then
  cp holo-runtime/benches/handoff.rs holo-runtime/benches/device_hop.rs "$wt/holo-runtime/benches/"
  cp -r holo-runtime/benches/common holo-runtime/benches/device_hop "$wt/holo-runtime/benches/"
  cp holo-runtime/Cargo.toml "$wt/holo-runtime/"; cp Cargo.lock "$wt/"
fi
source .ci/pick.sh
mkdir -p .gpu/base
(cd "$wt" && CARGO_TARGET_DIR=$target cargo bench --no-run --message-format=json -p holo-runtime \
  --bench handoff --bench device_hop 2>/dev/null | pick bench handoff device_hop) | while read -r exe; do
  case "$exe" in */handoff-*) cp "$exe" .gpu/base/handoff-base ;; */device_hop-*) cp "$exe" .gpu/base/device_hop-base ;; esac
done
strip .gpu/base/*
for b in handoff device_hop; do
  ! cmp -s .gpu/base/$b-base .gpu/bench/$b-* || { echo "base $b is the new binary" >&2; exit 1; }
done
git worktree remove --force "$wt"
du -sh .gpu
