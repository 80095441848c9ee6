#!/usr/bin/env bash
# Builds .gpu/ for .ci/h200-issue15.sh: the cross-process tests and their peer binary, the
# device suites today's channel changes touch (the emit path's seats, the pools), the
# runtime's unit tests, the ipc_hop and device_hop benches and the ipc_producer example
# (release, stripped).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rm -rf .gpu && mkdir -p .gpu/bin .gpu/bench .gpu/examples
source .ci/pick.sh
tests="ipc stream_contract topics handoff defects device_hot_path_no_alloc"
args=(); for t in $tests; do args+=(--test "$t"); done
cargo test --release --no-run --message-format=json -p holo-tests "${args[@]}" 2>/dev/null \
  | pick test $tests | while read -r exe; do cp "$exe" .gpu/bin/; done
cargo build --release -p holo-tests --bin ipc_peer
cp target/release/ipc_peer .gpu/bin/
cargo test --release --no-run --message-format=json -p holo-runtime --lib 2>/dev/null \
  | pick lib holo_runtime | while read -r exe; do cp "$exe" .gpu/bin/; done
cargo bench --no-run --message-format=json -p holo-runtime --bench ipc_hop --bench device_hop 2>/dev/null \
  | pick bench ipc_hop device_hop | while read -r exe; do cp "$exe" .gpu/bench/; done
cargo build --release -p holo-examples --example ipc_producer --example device_array_handoff
cp target/release/examples/ipc_producer target/release/examples/device_array_handoff .gpu/examples/
strip .gpu/bin/* .gpu/bench/* .gpu/examples/*
du -sh .gpu
