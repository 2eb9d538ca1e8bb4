#!/usr/bin/env bash
# Session 44, call 2 (right after call 1, on the same warm machine): the toolchain from the part
# call 1 parked and .gpu/p2/tc.part2, then the examples with JIT on the device: `nvfp4_moe`
# (three layers, the 64-expert top-8 one for the first time) and its torch peer (ci/gpu/moe_peer.py),
# and `fused_qkv --bench` (the 17 fixed layers against the CPU reference, then the timed calls).
set -u
R=$OUT
if ! cat /tmp/tcparts/tc.part1 .gpu/p2/tc.part2 | tar -xJ -C /tmp; then
  echo "toolchain: part 1 is gone (the machine was released after call 1)"; exit 2
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit,temperature.gpu --format=csv >"$R/smi.txt"
R=$R EXTRAS=.gpu/p2/extras.tar.xz BUDGET_BINS=${BB:-200} NVFP4_MOE_BUDGET_S=${NB:-180} \
  bash ci/gpu/device-run.sh extras
cat "$R/steps.txt"
