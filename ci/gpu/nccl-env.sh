# Source this on the GPU machine before `gpu-harness tp` / `validate` with ≥ 2 GPUs: makes torch's
# pip NCCL (nvidia/nccl/lib/libnccl.so.2) loadable under the name cudarc looks for (libnccl.so),
# and keeps NVLink multicast off.
NCCL_DIR=${NCCL_DIR:-$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)}
if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/libnccl.so.2" ]; then
  mkdir -p /tmp/nccl-lib && ln -sf "$NCCL_DIR/libnccl.so.2" /tmp/nccl-lib/libnccl.so
  export LD_LIBRARY_PATH=/tmp/nccl-lib:$NCCL_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "nccl-env: $NCCL_DIR/libnccl.so.2 as /tmp/nccl-lib/libnccl.so"
else
  echo "nccl-env: no libnccl.so.2 found (pip install nvidia-nccl-cu12, or set NCCL_DIR)" >&2
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
