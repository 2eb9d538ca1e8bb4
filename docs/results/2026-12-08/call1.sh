#!/usr/bin/env bash
# Session 44, call 1 (bundle-only, no toolchain): this session's build (.gpu/q3: attention prefill
# with exp2 flush-to-zero, fp8 per-tensor scales loaded once per block, the fp8 ` l10` candidate)
# against the build before e011c6f (.gpu/qb: c30f2fa, plain exp2) in the same call, beside the peers:
# fixed checks and property cases, bench + peers, the old build's bench, the fp8 tuner with the
# picks checked and benched, and the new build's bench once more. Also parks part 1 of the toolchain
# for call 2 (.gpu/p1).
set -u
R=$OUT
mkdir -p /tmp/tcparts && cp .gpu/p1/tc.part1 /tmp/tcparts/ 2>/dev/null && echo "tc.part1 parked"
OPS=attention,gemm_fp8_tensor,gemm_fp8_row
FP8=gemm_fp8_tensor,gemm_fp8_row
BMS=${BMS:-60}
OUT=$R QDIR=.gpu/q3 OPS=$OPS PROP_CASES=${PC:-60} PROP_SEED=2026120804 BUDGET_CHECK=${BC:-60} \
  BUDGET_PCHECK=${BP:-60} BUDGET_BENCH=${BB:-100} BUDGET_PEERS=${BPE:-100} BENCH_MS=$BMS \
  bash ci/gpu/device-run.sh quick
S=$R/more; mkdir -p $S /tmp/px /tmp/old
tar -xzf "$R/quick.tar.gz" -C /tmp/px ./peers.json 2>/dev/null || tar -xzf "$R/quick.tar.gz" -C /tmp/px peers.json
run() { # name budget cmd..
  local n=$1 b=$2; shift 2; local t0=$SECONDS
  timeout -k 5 "$b" "$@" >"$S/$n.log" 2>&1
  echo "$n: exit $? ($((SECONDS - t0)) s of $b)" | tee -a "$S/steps.txt"; tail -n 2 "$S/$n.log"
}
# The build before e011c6f on the same calls.
xz -dc .gpu/qb/gh.xz >/tmp/old/gh && chmod +x /tmp/old/gh && xz -dc .gpu/qb/q.bundle.xz >/tmp/old/q.bundle
run old_bench ${BO:-90} env CUTILE_CACHE_DIR=/tmp/kcache-old /tmp/old/gh bench --bundle /tmp/old/q.bundle \
  --out /tmp/old/r --ops $OPS --measurement-ms $BMS --warm-up-ms 20
cp /tmp/px/peers.json /tmp/old/r/ && run old_report 10 /tmp/old/gh report /tmp/old/r
cp /tmp/old/r/report.md $S/report-old.md 2>/dev/null
# The fp8 tuner (the ` l10` candidate among the others), its picks checked and benched.
T=/tmp/t; mkdir -p $T/tuned && cp /tmp/px/peers.json $T/tuned/
run tune ${BT:-110} env CUTILE_CACHE_DIR=/tmp/kcache /tmp/gh tune --bundle /tmp/q.bundle --out $T/tune --ops $FP8
run check_tuned 40 env CUTILE_CACHE_DIR=/tmp/kcache CUTILE_TUNE=on CUTILE_TUNE_CACHE=$T/tune/tuning.json \
  /tmp/gh check --fixed --bundle /tmp/q.bundle --ops $FP8 --out $T/tuned/check
run bench_tuned ${BBT:-60} env CUTILE_CACHE_DIR=/tmp/kcache CUTILE_TUNE=on CUTILE_TUNE_CACHE=$T/tune/tuning.json \
  /tmp/gh bench --bundle /tmp/q.bundle --out $T/tuned --ops $FP8 --measurement-ms $BMS --warm-up-ms 20
run report_tuned 10 /tmp/gh report $T/tuned
cp $T/tuned/report.md $S/report-tuned.md 2>/dev/null
# This build again, after the old one (order effects on a warm card).
mkdir -p /tmp/new2 && cp /tmp/px/peers.json /tmp/new2/
run new2_bench ${BN2:-90} env CUTILE_CACHE_DIR=/tmp/kcache /tmp/gh bench --bundle /tmp/q.bundle --out /tmp/new2 \
  --ops $OPS --measurement-ms $BMS --warm-up-ms 20
run new2_report 10 /tmp/gh report /tmp/new2
cp /tmp/new2/report.md $S/report-new2.md 2>/dev/null
tar -czf $R/more.tar.gz --exclude=./criterion --exclude=criterion -C / tmp/old/r tmp/t tmp/new2 2>/dev/null
cat $S/steps.txt
grep -h "attention bf16 \[4, 32, 4096, 128\]" $S/old_bench.log $S/new2_bench.log | head -4
