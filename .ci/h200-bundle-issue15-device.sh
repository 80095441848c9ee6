#!/usr/bin/env bash
# Builds .gpu/ for .ci/h200-issue15-device.sh: the cross-process suites (host and device)
# and their peer binary, the ipc_hop and
# ipc_device_hop benches and the ipc_producer example (release, stripped).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rm -rf .gpu && mkdir -p .gpu/bin .gpu/bench .gpu/examples
source .ci/pick.sh
# (stream_contract, topics and handoff: .ci/h200-bundle-targeted.sh; with them .gpu/ passes 64 MiB)
tests="ipc ipc_device ipc_publish ipc_boundary ipc_sessions ipc_import_no_alloc ipc_export_no_alloc"
args=(); for t in $tests; do args+=(--test "$t"); done
cargo test --release --no-run --message-format=json -p holo-tests "${args[@]}" 2>/dev/null \
  | pick test $tests | while read -r exe; do cp "$exe" .gpu/bin/; done
cargo build --release -p holo-tests --bin ipc_peer
cp target/release/ipc_peer .gpu/bin/
benches="${HOLO_BENCHES:-ipc_hop ipc_device_hop}"
bargs=(); for b in $benches; do bargs+=(--bench "$b"); done
cargo bench --no-run --message-format=json -p holo-runtime "${bargs[@]}" 2>/dev/null \
  | pick bench $benches | while read -r exe; do cp "$exe" .gpu/bench/; done
cargo build --release -p holo-examples --example ipc_producer
cp target/release/examples/ipc_producer .gpu/examples/
strip .gpu/bin/* .gpu/bench/* .gpu/examples/* 2>/dev/null || true
du -sh .gpu
