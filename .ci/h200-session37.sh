#!/usr/bin/env bash
# The thirty-seventh session's one device call, from the repo root after
# .ci/h200-session36-bundle.sh (library as at `ca1ad1c`): the whole suite on CUDA
# (.ci/h200-session36-suite.sh: every test binary with HOLO_REQUIRE_DEVICE=cuda, then every
# example), the examples and the kernel-launching and DLPack test binaries under
# compute-sanitizer (.ci/h200-session36-sanitizer.sh, at most 200 s), then issue 12's hops
# and the compile section (.ci/h200-session36.sh). Each script packs its logs into one
# archive under $OUT; the last line gives each script's exit code.
bash .ci/h200-session36-suite.sh; suite=$?
timeout 200 bash .ci/h200-session36-sanitizer.sh; sanitizer=$?
bash .ci/h200-session36.sh; hops=$?
echo "suite rc $suite, sanitizer rc $sanitizer, hops rc $hops"
[ "$suite" = 0 ] && [ "$sanitizer" = 0 ]
