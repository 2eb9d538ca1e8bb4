#!/usr/bin/env bash
# Prepared in session 43, never run (no device time left): copy to .gpu/q3/run.sh beside a harness
# and bundle planned with `gpu-harness plan --arch sm_90 --ops attention --cases 40 --seed 2026120802`
# (q3) and the plain-exp2 build of .gpu/q2.
# Session 43: attention prefill with exp2 flush-to-zero (q3: new harness + bundle) against the
# session's earlier build (q2: plain exp2) in the same call, beside cuDNN / flash (peers).
set -u
R=$OUT
OUT=$R QDIR=.gpu/q3 OPS=attention PROP_CASES=${PC:-40} PROP_SEED=2026120802 BUDGET_CHECK=${BC:-80} \
  BUDGET_PCHECK=${BP:-80} BUDGET_BENCH=${BB:-90} BUDGET_PEERS=${BPE:-100} BENCH_MS=${BMS:-60} \
  bash ci/gpu/device-run.sh quick
# The plain-exp2 build on the same calls, right after (its own harness and bundle).
mkdir -p /tmp/old "$R/old"
xz -dc .gpu/q2/gh.xz >/tmp/old/gh && chmod +x /tmp/old/gh
xz -dc .gpu/q2/q.bundle.xz >/tmp/old/q.bundle
CUTILE_CACHE_DIR=/tmp/kcache-old timeout -k 5 ${BO:-90} /tmp/old/gh bench --bundle /tmp/old/q.bundle --out /tmp/old/r \
  --ops attention --measurement-ms ${BMS:-60} --warm-up-ms 20 >"$R/old/bench.log" 2>&1
echo "old bench: exit $?"
tar -xzf "$R/quick.tar.gz" -C /tmp/old --wildcards "*peers.json" 2>/dev/null && cp /tmp/old/peers.json /tmp/old/r/ && \
  /tmp/gh report /tmp/old/r >"$R/old/report.log" 2>&1
cp /tmp/old/r/report.md "$R/old/" 2>/dev/null; cp /tmp/old/r/bench.json "$R/old/" 2>/dev/null
# New build again after the old one (order effects on a warm card).
CUTILE_CACHE_DIR=/tmp/kcache timeout -k 5 ${BN2:-90} /tmp/gh bench --bundle /tmp/q.bundle --out /tmp/new2 \
  --ops attention --measurement-ms ${BMS:-60} --warm-up-ms 20 >"$R/old/bench-new2.log" 2>&1
echo "new bench 2: exit $?"
cp /tmp/new2/bench.json "$R/old/bench-new2.json" 2>/dev/null
grep -h "attention bf16 \[4, 32, 4096, 128\]" "$R/old/bench.log" "$R/old/bench-new2.log" | head
cat "$R/report.md" 2>/dev/null | head -40
