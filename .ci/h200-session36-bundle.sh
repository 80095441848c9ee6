#!/usr/bin/env bash
# Builds the thirty-sixth session's bundle (.ci/h200-session36-suite.sh, .ci/h200-session36.sh)
# into .gpu/: every test binary of the workspace in release, the examples and the ipc peer,
# stripped, in one xz tarball (.gpu/suite.tar.xz: deps/, examples/, peer/; the test binaries
# alone are 229 MB stripped, the tarball 38 MB), and the `device_hop` and `host_hop` benches
# in .gpu/bench (45 MB in all, under the device tool's 64 MiB).
set -euo pipefail
source .ci/pick.sh
rm -rf .gpu /tmp/holo-suite && mkdir -p .gpu/bench /tmp/holo-suite/deps /tmp/holo-suite/examples /tmp/holo-suite/peer
cargo test --release --no-run --workspace --message-format=json 2>/dev/null \
  | pick harness | xargs -I{} cp {} /tmp/holo-suite/deps/
cargo build --release -p holo-examples --examples --message-format=json 2>/dev/null \
  | pick example | xargs -I{} cp {} /tmp/holo-suite/examples/
cargo build --release -p holo-tests --bin ipc_peer
cp target/release/ipc_peer /tmp/holo-suite/peer/
strip /tmp/holo-suite/deps/* /tmp/holo-suite/examples/* /tmp/holo-suite/peer/*
tar cf - -C /tmp/holo-suite deps examples peer | xz -6 -T2 > .gpu/suite.tar.xz
cargo bench -p holo-runtime --no-run --message-format=json --bench device_hop --bench host_hop 2>/dev/null \
  | pick bench device_hop host_hop | xargs -I{} cp {} .gpu/bench/
strip .gpu/bench/*
du -sh .gpu
