#!/usr/bin/env bash
# Session 43, one call: the gemm bundle's fixed checks (the large ragged cluster-tile check) and
# property cases, then attention prefill and fp8 per-tensor 4096^3 under ncu beside their peers.
set -u
R=$OUT
OUT=$R QDIR=.gpu/q1 OPS=gemm PROP_CASES=80 PROP_SEED=2026120801 BUDGET_CHECK=${BC:-110} BUDGET_PCHECK=${BP:-90} \
  SKIP="bench peers report" bash ci/gpu/device-run.sh quick
mkdir -p "$R/ncu43"
OUT=$R/ncu43 NB=${NB:-90} bash .gpu/q2/ncu.sh
