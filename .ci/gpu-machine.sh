#!/usr/bin/env bash
# What a GPU session script's machine.log holds: the time, the card and its driver, the
# CPU count and model. `bash .ci/gpu-machine.sh | tee "$out/machine.log"` (extra lines,
# such as the glibc version, follow from the caller).
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
grep -m1 "model name" /proc/cpuinfo
