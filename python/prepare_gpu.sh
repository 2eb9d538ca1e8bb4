#!/usr/bin/env bash
# Builds everything python/gpu_check.sh needs into the git-ignored .gpu-py/ of the repo root, on a
# machine with cargo, maturin (`pip install maturin`), tileiras (`cargo xtask toolchain`) and network;
# the GPU machine has none of them.
#
#   python/prepare_gpu.sh [TILEGYM_GIT_DIR]
#
# .gpu-py/wheels/       the cutile-rs-torch wheel (AOT bundle for sm_90 and sm_100 inside)
# .gpu-py/kernels-dir/  Cargo.toml + target/release/libcutile_kernels.so: the layout TileGym's cutile-rs
#                       backend loads with CUTILE_RS_AUTOBUILD=0; kernels.bundle (the wheel's),
#                       tests.bundle and tilegym.bundle (the test suites' shape classes, sm_90)
# .gpu-py/deps/         cffi and pycparser wheels for Python 3.12 (TileGym's loader needs cffi)
# .gpu-py/tilegym/      the part of TileGym its op tests import (src/tilegym, tests/), unmodified
#
# TILEGYM_GIT_DIR is a git directory of github.com/NVIDIA/TileGym (a bare mirror is fine); without it
# the tilegym/ part is skipped. Everything stays out of git commits (.gitignore has /.gpu-py).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.gpu-py"
mkdir -p "$out"
# Cargo profile of the wheel and the .so (release; `PROFILE=dev` for a quicker unoptimized build, which
# is stripped below). The bundles are made with the dev-profile xtask (`cargo xtask aot`): a release
# xtask binary currently fails to link (rust-lld: duplicate `__cutile_body_layer_norm` symbols in two
# codegen units of cutile-kernels); the release cdylibs link fine.
profile=${PROFILE:-release}
target_sub=$([ "$profile" = dev ] && echo debug || echo "$profile")

# The AOT bundle: the Python API's ops (registry names), their representative shape classes, sm_90 (H100/H200) and
# sm_100 (B200). The wheel ships it; the C ABI reads it through CUTILE_BUNDLE.
ops=softmax,rms_norm,layer_norm,gemm,attention,silu_and_mul,swiglu,gelu,gelu_tanh,relu,geglu,geglu_tanh,rope,kv_cache_write,kv_cache_write_paged,attention_decode,attention_decode_paged,embedding,argmax,topk,fused_qkv
mkdir -p "$out/kernels-dir/target/release" "$out/wheels"
cargo xtask aot --arch sm_90,sm_100 --ops "$ops" -o "$out/kernels-dir/kernels.bundle"
cp "$out/kernels-dir/kernels.bundle" "$root/python/pysrc/cutile_rs_torch/kernels.bundle"
# The GPU suite's own shapes (python/tests/test_gpu.py) and TileGym's test shapes, sm_90 (the H200).
cargo xtask aot --arch sm_90 --shapes "$root/python/tests/gpu_shapes.toml" -o "$out/kernels-dir/tests.bundle"
cargo xtask aot --arch sm_90 --shapes "$root/python/tilegym.shapes.toml" \
    -o "$out/kernels-dir/tilegym.bundle"

# The abi3 wheel, manylinux_2_28 (glibc 2.28: RHEL 8, Ubuntu 20.04 and later). `--zig` links against
# zig's glibc 2.28 stubs instead of this machine's newer glibc (`pip install ziglang`); maturin's built-in
# auditwheel then checks the glibc symbol versions against the tag. No manylinux container is used.
rm -f "$out"/wheels/*.whl
(cd "$root/python" && maturin build --profile "$profile" --strip --zig --compatibility manylinux_2_28 -o "$out/wheels")

# libcutile_kernels.so where TileGym looks for it (CUTILE_RS_KERNELS_DIR with CUTILE_RS_AUTOBUILD=0:
# a folder with a Cargo.toml and target/release/libcutile_kernels.so).
cargo build --profile "$profile" -p cutile-kernels-capi
cp "${CARGO_TARGET_DIR:-$root/target}/$target_sub/libcutile_kernels.so" "$out/kernels-dir/target/release/"
strip "$out/kernels-dir/target/release/libcutile_kernels.so"
printf '[package]\nname = "cutile_kernels"\nversion = "0.0.0"\n# Prebuilt; see cutile-kernels-capi.\n' \
    >"$out/kernels-dir/Cargo.toml"

# TileGym's Python loader imports cffi; pycparser is its only requirement.
mkdir -p "$out/deps"
if ! ls "$out"/deps/cffi-*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$out/deps" cffi==2.1.1 pycparser==3.12
fi

if [ "${1:-}" != "" ]; then
    rm -rf "$out/tilegym" && mkdir -p "$out/tilegym"
    # Only what `tests/ops/test_*.py` import: the package and the tests folder (no docs, skills, data).
    git --git-dir="$1" archive HEAD src/tilegym tests pyproject.toml | tar -x -C "$out/tilegym"
    rm -rf "$out/tilegym/tests/benchmark" "$out/tilegym/tests/transformers"
fi
du -sh "$out"/* | sed 's/^/  /'
echo "payload: $(du -sh "$out" | cut -f1) in .gpu-py (carry it: run(..., carry=[\".gpu-py\"]))"
