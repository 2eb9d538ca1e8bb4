#!/usr/bin/env bash
# Every GPU check of the Python package and the C ABI, on the GPU machine (no network, no cargo),
# from the repo root with the .gpu-py/ payload that python/prepare_gpu.sh made:
#
#   bash python/gpu_check.sh [all|ours|tilegym]   # logs and a summary under $OUT (or /tmp/gpu-check)
#
# Budget: about 4 minutes for ours and 100 s per TileGym file (OURS_TIMEOUT, PYTEST_TIMEOUT); TILEGYM_FILES
# (default "matmul bmm silu_and_mul swiglu attention_sink") picks TileGym files, so the suites can be split
# over several 10-minute device commands (matmul and bmm hold perf tests up to 32768^3 that need minutes).
#
# 1. installs the cutile-rs-torch wheel (and cffi for TileGym) into a scratch folder, from files only;
# 2. python/tests/test_gpu.py: every op against torch on random shapes and dtypes, opcheck, a
#    torch.compile'd module, CUDA graph capture + replay, host overhead of a tiny call vs torch;
# 3. TileGym's own op tests, unmodified, against .gpu-py/kernels-dir/target/release/libcutile_kernels.so
#    (one pytest per file, the cutile-rs cases only, no fallback to other backends).
#
# Prints one line per test file (passed / failed / skipped), writes summary.txt and logs.tgz to $OUT.
set -u
mode=${1:-all}
root=$(pwd)
payload="$root/.gpu-py"
out="${OUT:-/tmp/gpu-check}"
logs=$(mktemp -d)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=python3
site=/tmp/cutile-site
summary="$out/summary.txt"
: >"$summary"

note() { echo "$*" | tee -a "$summary"; }

rm -rf "$site"
if ! $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    "$payload"/wheels/*.whl "$payload"/deps/*.whl >"$logs/install.log" 2>&1; then
    note "install: FAILED (see install.log)"
    cat "$logs/install.log"
    tar -czf "$out/logs.tgz" -C "$logs" .
    exit 1
fi
export PYTHONPATH="$site"
note "install: ok ($(ls "$payload"/wheels/*.whl | xargs -n1 basename))"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' | tee -a "$summary"

# Runs pytest on one file; records "NAME: passed/failed/skipped" from its junit report.
run_pytest() {
    local name=$1 dir=$2
    shift 2
    local log="$logs/$name.log" xml="$logs/$name.xml"
    local start=$SECONDS
    (cd "$dir" && timeout "${PYTEST_TIMEOUT:-100}" $py -m pytest -q -rfEs -p no:cacheprovider --junitxml="$xml" "$@") >"$log" 2>&1
    local rc=$?
    local counts
    counts=$($py - "$xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    r = ET.parse(sys.argv[1]).getroot()
    s = r if r.tag == "testsuite" else r.find("testsuite")
    t, f, e, sk = (int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    print(f"{t - f - e - sk} passed, {f} failed, {e} errors, {sk} skipped")
except Exception as ex:
    print(f"no report ({ex.__class__.__name__})")
EOF
)
    note "$(printf '%-28s rc=%-3s %s (%ss)' "$name" "$rc" "$counts" $((SECONDS - start)))"
    grep -E "^(FAILED|ERROR)" "$log" | head -20 | sed 's/^/    /' | tee -a "$summary"
    case "$counts" in no\ report*) tail -3 "$log" | sed 's/^/    /' | tee -a "$summary" ;; esac
}

# Import with no GPU visible: must not touch the device.
if CUDA_VISIBLE_DEVICES="" $py -c "import cutile_rs_torch as c; print('bundle', c.bundle_path())" >"$logs/import.log" 2>&1; then
    note "import without a GPU: ok ($(tail -1 "$logs/import.log"))"
else
    note "import without a GPU: FAILED"; tail -5 "$logs/import.log" | sed 's/^/    /' | tee -a "$summary"
fi

# Our suite: the package registers its own AOT bundle on import; the suite's other shape classes come
# from tests.bundle (no tileiras here).
export CUTILE_BUNDLE="$payload/kernels-dir/tests.bundle"
[ "$mode" = tilegym ] || PYTEST_TIMEOUT=${OURS_TIMEOUT:-240} run_pytest ours "$root/python/tests" test_gpu.py -s

# TileGym's tests against our .so.
tg="$payload/tilegym"
if [ "$mode" = ours ]; then
    :
elif [ -d "$tg/tests/ops" ]; then
    export DISABLE_FALLBACK=1 CUTILE_TUTORIALS_BACKEND=cutile-rs CUTILE_RS_AUTOBUILD=0
    export CUTILE_RS_KERNELS_DIR="$payload/kernels-dir"
    export CUTILE_BUNDLE="$payload/kernels-dir/kernels.bundle:$payload/kernels-dir/tilegym.bundle:$payload/kernels-dir/tests.bundle"
    export CUTILE_KERNELS_LOG=1
    for t in ${TILEGYM_FILES:-matmul bmm silu_and_mul swiglu attention_sink}; do
        PYTHONPATH="$site:$tg/src" run_pytest "tilegym_$t" "$tg" "tests/ops/test_$t.py" -k "cutile_rs or cutile-rs"
    done
else
    note "tilegym: skipped (no .gpu-py/tilegym; run python/prepare_gpu.sh with a TileGym git dir)"
fi

cp "$logs"/*.log "$logs"/*.xml "$out"/ 2>/dev/null || true
tar -czf "$out/logs.tgz" -C "$logs" .
# At most 8 files come back from the device: keep the summary, the tarball and our suite's log.
find "$out" -maxdepth 1 -type f ! -name summary.txt ! -name logs.tgz ! -name ours.log -delete
echo "---- summary ($summary)"
cat "$summary"
