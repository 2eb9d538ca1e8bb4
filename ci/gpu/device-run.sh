#!/usr/bin/env bash
# The full GPU session on the H200 (no cargo, no tileiras, no network there), in stages that fit the device
# tool's limits: one call runs at most 600 s and carries at most 64 MiB, and the toolchain archive alone is
# 61.5 MB, so it travels in two parts over two back-to-back calls (the machine stays warm ~30 s between).
#
#   stage tc1    carry .gpu/p1 (tc.part1)          : park toolchain part 1 in /tmp/tcparts
#   stage run    carry .gpu/p2 (tc.part2, gh.xz)   : toolchain, harness, property check with JIT on a cold
#                                                    cache, the bundle built there
#   stage bench  (nothing)                         : bench (criterion, CUDA events)
#   stage peers  carry .gpu/reference (+ extras)   : peers.py, report, tune, validate, $EXTRA
#   stage extras carry .gpu/p3 (extras.tar.xz)     : GPU tests of test binaries (`--ignored`, $TEST_THREADS), the
#                                                    nvfp4_moe example and its torch peer (ci/gpu/moe_peer.py);
#                                                    EXTRAS names another tarball (a second call's payload)
#   stage quick  carry .gpu/q (gh.xz, q.bundle[.xz]; QDIR another folder): one bundle-only call, no toolchain: fixed checks,
#                                                    bench, peers and report of $OPS (a bundle from
#                                                    `gpu-harness plan --ops $OPS`), results in
#                                                    $OUT/quick.tar.gz (+ report.md, steps.txt); with
#                                                    TUNE_OPS also the tuner on those ops, the fixed
#                                                    checks and a second bench with its picks
#                                                    (report-tuned.md); with LAUNCH_OPS also
#                                                    every launch of those calls timed in place
#                                                    (launches.md, `gpu-harness launches`); with
#                                                    PROP_CASES (and PROP_SEED, PROP_OPS) also the
#                                                    property cases of a bundle planned with
#                                                    `gpu-harness plan --cases --seed` (no tileiras)
#   stage python carry .gpu-py                     : python/gpu_check.sh ($PY_MODE, default all) with the
#                                                    toolchain of stage run, so a shape class outside the
#                                                    bundles (TileGym's transposed bmm views, its perf
#                                                    shapes) is compiled there as TileGym's own build would
# Each stage after tc1 leaves its tarball in $OUT.
#
# Every step runs under `timeout` with its budget (seconds, overridable as BUDGET_<STEP>), logs into
# $R/<step>.log and appends its exit status to $R/steps.txt (SKIP="a b" leaves steps out; CHECK_OPS,
# PLAN_OPS, BENCH_OPS (bench and peers) and TUNE_OPS narrow those steps to some ops) (124: over budget; what it wrote is kept:
# check.json every 50 cases, bench.json and peers.json after every call).
# Prepared on the CPU machine by `cargo xtask gpu prepare` (docs/gpu-runner.md, "Device commands").
set -u
R=${R:-/tmp/gpu-run}
SEED=${SEED:-20261202}
CASES=${CASES:-3000}
mkdir -p "$R"

step() {
  local name=$1 budget=$2
  shift 2
  # SKIP="validate tune" leaves steps out (recorded as skipped).
  case " ${SKIP:-} " in *" $name "*) echo "$name: skipped" | tee -a "$R/steps.txt"; return 0 ;; esac
  local var="BUDGET_${name^^}"; var=${var//[^A-Z0-9_]/_}
  budget=${!var:-$budget}
  local t0=$SECONDS
  timeout -k 5 "$budget" "$@" >"$R/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc ($((SECONDS - t0)) s of $budget)" | tee -a "$R/steps.txt"
  tail -n 3 "$R/$name.log"
}

toolchain_env() {
  unset CUDA_HOME CUDA_PATH CUDA_ROOT
  export CUTILE_TILEIRAS=/tmp/nvidia/cu13/bin/tileiras
}

case "${1:-}" in
  tc1)
    mkdir -p /tmp/tcparts && cp .gpu/p1/tc.part1 /tmp/tcparts/ || exit 2
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
    ;;
  run)
    cat /tmp/tcparts/tc.part1 .gpu/p2/tc.part2 | tar -xJ -C /tmp || { echo "toolchain: run stage tc1 first"; exit 2; }
    xz -dc .gpu/p2/gh.xz >/tmp/gh && chmod +x /tmp/gh || exit 2
    toolchain_env
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv >"$R/smi.txt"
    # The JIT path for real: tileiras here, a cold kernel cache.
    export CUTILE_CACHE_DIR=${COLD_CACHE:-/tmp/kcache-cold}
    step check 270 /tmp/gh check --cases "$CASES" --seed "$SEED" --out "$R/check" ${CHECK_OPS:+--ops "$CHECK_OPS"}
    export CUTILE_CACHE_DIR=/tmp/kcache
    step plan 150 /tmp/gh plan --arch sm_90 --bundle /tmp/k.bundle --jobs 16 ${PLAN_OPS:+--ops "$PLAN_OPS"}
    # Kept in case the machine is gone before the next stage.
    tar -czf "$OUT/run.tar.gz" --exclude=./criterion -C "$R" .
    grep -h 'FAILED\|ERROR\|NOT COVERED\|JIT\|running' "$R"/*.log | head -n 40
    ;;
  bench)
    [ -x /tmp/gh ] || { echo "the machine was released since stage run: start again at tc1"; exit 2; }
    toolchain_env
    export CUTILE_CACHE_DIR=/tmp/kcache
    # Without the plan step's bundle (SKIP=plan) the kernels come from the JIT cache of stage run.
    bundle=(); [ -f /tmp/k.bundle ] && bundle=(--bundle /tmp/k.bundle)
    step bench 500 /tmp/gh bench "${bundle[@]}" --out "$R" --measurement-ms "${BENCH_MS:-100}" --warm-up-ms 25 \
      ${BENCH_OPS:+--ops "$BENCH_OPS"}
    tar -czf "$OUT/bench.tar.gz" --exclude=./criterion -C "$R" .
    grep -h 'ERROR' "$R/bench.log" | head -n 20
    ;;
  peers)
    [ -x /tmp/gh ] || { echo "the machine was released since stage run: start again at tc1"; exit 2; }
    toolchain_env
    export CUTILE_CACHE_DIR=/tmp/kcache
    step peers 240 python3 ci/gpu/peers.py "$R/peers.json" --calls "$R/bench-calls.json" \
      ${BENCH_OPS:+--ops "$BENCH_OPS"}
    step report 20 /tmp/gh report "$R"
    step tune 80 /tmp/gh tune --bundle /tmp/k.bundle --out "$R/tune" --ops "${TUNE_OPS:-gemm}"
    step validate 120 /tmp/gh validate --bundle /tmp/k.bundle --out "$R/validate" --processes-per-gpu 2 \
      --check-cases 100 --measurement-ms 50 --warm-up-ms 20 --bench-ops softmax,rms_norm,gemm
    if [ -n "${EXTRA:-}" ]; then step extra "${BUDGET_EXTRA:-120}" bash -c "$EXTRA"; fi
    tar -czf "$OUT/results.tar.gz" --exclude=./criterion -C "$R" .
    cp "$R/steps.txt" "$R/report.md" "$OUT/" 2>/dev/null
    grep -h 'FAILED\|ERROR\|NOT COVERED' "$R"/*.log | head -n 40
    cat "$R/steps.txt"
    ;;
  extras)
    [ -x /tmp/nvidia/cu13/bin/tileiras ] || { echo "the machine was released since stage run: start again at tc1"; exit 2; }
    toolchain_env
    export CUTILE_CACHE_DIR=/tmp/kcache
    rm -rf /tmp/x && mkdir -p /tmp/x && tar -xJf "${EXTRAS:-.gpu/p3/extras.tar.xz}" -C /tmp/x || exit 2
    for t in /tmp/x/tests/*; do
      [ -e "$t" ] || continue
      # TEST_THREADS > 1 overlaps the JIT compiles of tests split into many functions (the moe tests).
      # TEST_FILTER (a libtest name filter) narrows the test binaries to some tests.
      step "test-$(basename "$t")" "${BUDGET_TESTS:-150}" "$t" ${TEST_FILTER:+"$TEST_FILTER"} --ignored \
        --test-threads "${TEST_THREADS:-1}" --nocapture
    done
    for b in /tmp/x/bin/*; do [ -e "$b" ] || continue; step "bin-$(basename "$b")" "${BUDGET_BINS:-200}" "$b"; done
    step moe-peer 150 python3 ci/gpu/moe_peer.py
    tar -czf "$OUT/extras.tar.gz" -C "$R" .
    grep -h 'test result\|FAILED\|panicked\|µs' "$R"/test-*.log "$R"/bin-*.log "$R"/moe-peer.log | head -n 60
    ;;
  quick)
    : "${OPS:?set OPS to the comma-separated ops of .gpu/q/q.bundle, or all}"
    # QDIR: another prepared folder than .gpu/q (two bundles prepared for one session).
    Q=${QDIR:-.gpu/q}
    xz -dc "$Q/gh.xz" >/tmp/gh && chmod +x /tmp/gh || exit 2
    # Cubins compress about 20x: a bundle with many property cases travels as q.bundle.xz.
    QB=$Q/q.bundle
    if [ -f "$Q/q.bundle.xz" ]; then xz -dc "$Q/q.bundle.xz" >/tmp/q.bundle && QB=/tmp/q.bundle || exit 2; fi
    R=$OUT
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit,temperature.gpu --format=csv >"$R/smi.txt"
    export CUTILE_CACHE_DIR=/tmp/kcache
    # OPS=all: every op's fixed checks, bench rows and peers (the calls take no --ops).
    OA=(--ops "$OPS"); [ "$OPS" = all ] && OA=()
    step check "${BUDGET_CHECK:-40}" /tmp/gh check --fixed --bundle "$QB" ${OA[@]+"${OA[@]}"} --out "$R/check"
    if [ -n "${PROP_CASES:-}" ]; then
      # Property cases from the bundle alone: it must come from `gpu-harness plan --cases $PROP_CASES
      # --seed $PROP_SEED --ops $PROP_OPS` (the same three values draw the same cases); PROP_OPS=all
      # is every op, as a plan without --ops.
      PO=(--ops "${PROP_OPS:-$OPS}")
      [ "${PROP_OPS:-}" = all ] && PO=()
      step pcheck "${BUDGET_PCHECK:-90}" env -u CUTILE_TILEIRAS /tmp/gh check --cases "$PROP_CASES" \
        --seed "${PROP_SEED:?set PROP_SEED to the seed the bundle was planned with}" \
        ${PO[@]+"${PO[@]}"} --bundle "$QB" --out "$R/pcheck" --workers 8
    fi
    step bench "${BUDGET_BENCH:-60}" /tmp/gh bench --bundle "$QB" --out "$R" ${OA[@]+"${OA[@]}"} \
      --measurement-ms "${BENCH_MS:-60}" --warm-up-ms 20
    step peers "${BUDGET_PEERS:-60}" python3 ci/gpu/peers.py "$R/peers.json" --calls "$R/bench-calls.json" \
      ${OA[@]+"${OA[@]}"}
    step report 10 /tmp/gh report "$R"
    if [ -n "${LAUNCH_OPS:-}" ]; then
      # Every launch of those ops' calls timed in place (`gpu-harness launches`).
      step launches "${BUDGET_LAUNCHES:-90}" /tmp/gh launches --bundle "$QB" --out "$R/launches" \
        --ops "$LAUNCH_OPS" --iterations "${LAUNCH_ITERATIONS:-20}"
      cp "$R/launches/launches.md" "$R/" 2>/dev/null
    fi
    if [ -n "${TUNE_OPS:-}" ]; then
      # The tuner's winners against the defaults in the same call: tune, then bench again with the
      # tuning cache on (same calls, so the peers above pair with both benches).
      step tune "${BUDGET_TUNE:-150}" /tmp/gh tune --bundle "$QB" --out "$R/tune" --ops "$TUNE_OPS"
      mkdir -p "$R/tuned" && cp "$R/peers.json" "$R/tuned/" 2>/dev/null
      # The picks must also pass the fixed checks (every output against the CPU reference, not only
      # the tuner's gate on the first output).
      step check_tuned "${BUDGET_CHECK:-40}" env CUTILE_TUNE=on CUTILE_TUNE_CACHE="$R/tune/tuning.json" \
        /tmp/gh check --fixed --bundle "$QB" --ops "$TUNE_OPS" --out "$R/tuned/check"
      step bench_tuned "${BUDGET_BENCH_TUNED:-90}" env CUTILE_TUNE=on CUTILE_TUNE_CACHE="$R/tune/tuning.json" \
        /tmp/gh bench --bundle "$QB" --out "$R/tuned" --ops "$TUNE_OPS" \
        --measurement-ms "${BENCH_MS:-60}" --warm-up-ms 20
      step report_tuned 10 /tmp/gh report "$R/tuned"
      cp "$R/tuned/report.md" "$R/report-tuned.md" 2>/dev/null
    fi
    grep -h 'FAILED\|ERROR' "$R"/*.log | head -n 30
    cat "$R/steps.txt"
    # The device tool brings back only a few files: everything but criterion's folders in one tarball,
    # and the report beside it.
    tar -czf /tmp/quick.tar.gz --exclude=./criterion -C "$R" .
    find "$R" -mindepth 1 -maxdepth 1 ! -name report.md ! -name report-tuned.md ! -name launches.md ! -name steps.txt -exec rm -rf {} +
    mv /tmp/quick.tar.gz "$R/"
    ;;
  python)
    [ -x /tmp/nvidia/cu13/bin/tileiras ] || { echo "the machine was released since stage run: start again at tc1"; exit 2; }
    toolchain_env
    export CUTILE_CACHE_DIR=/tmp/kcache-py
    OUT="$OUT" PYTEST_TIMEOUT=${PYTEST_TIMEOUT:-150} bash python/gpu_check.sh "${PY_MODE:-all}"
    ;;
  *)
    echo "usage: $0 tc1|run|bench|peers|extras|quick|python" >&2
    exit 2
    ;;
esac
