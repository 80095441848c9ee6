#!/usr/bin/env bash
# Miri (the Rust interpreter that checks unsafe code for undefined behaviour: dangling and
# aliased pointers under Stacked Borrows, data races, uninitialized reads) over
# holo-runtime's unit tests: the pool, free list and release ledger, the queues, tensors
# and their DLPack capsules, the session's records and clock, the software device.
# RELIABILITY.md ("Miri") says what it found and what it leaves out.
#
# `bash .ci/miri.sh [unit test filter…]`. Needs a nightly toolchain with the miri and rust-src
# components (`rustup component add --toolchain nightly miri rust-src`); MIRI_TOOLCHAIN
# names another. Its own target directory (Miri builds every crate anew).
#
# Flags: isolation stays on (Miri's virtual clock, deterministic: 5 µs a basic block),
# with what it refuses (reading /proc/meminfo) returned as an error to the caller, as on a
# host without /proc; leaks are not checked (the software device's stream threads and
# the DLPack block cache outlive the tests by design).
# Left out, as Miri runs no foreign library: the CUDA and OpenCL backends' tests (dlopen).
# Tests marked `#[cfg_attr(miri, ignore = "…")]` say why in place: timing windows
# calibrated for native speed, memfd segments, /proc, iceoryx2's shared memory.
#
# Then the integration suites named in MIRI_SUITES (default: receive_in_place, whole
# sessions on the software device with host leases and in-place reads, about 2 minutes
# here; `MIRI_SUITES="stream_contract dlpack handoff topics defects"` runs more, the first
# about 15 minutes on its own; MIRI_SUITES= runs none, and so does a unit-test filter
# unless MIRI_SUITES is set). Under Miri the test backends are the software device alone.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
toolchain=${MIRI_TOOLCHAIN:-nightly}
export MIRIFLAGS="-Zmiri-isolation-error=warn-nobacktrace -Zmiri-ignore-leaks"
export CARGO_TARGET_DIR=target/miri
cargo "+$toolchain" miri test -p holo-runtime --lib -- \
  --skip device::opencl --skip device::cuda "$@"
suites=()
# A unit-test filter runs the unit tests alone unless MIRI_SUITES names suites too.
default_suites="receive_in_place"; [ $# -eq 0 ] || default_suites=
for s in ${MIRI_SUITES-$default_suites}; do suites+=(--test "$s"); done
if [ ${#suites[@]} -gt 0 ]; then
  cargo "+$toolchain" miri test -p holo-tests "${suites[@]}"
fi
