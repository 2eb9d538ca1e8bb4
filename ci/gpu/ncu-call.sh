#!/usr/bin/env bash
# One benchmark call's kernels under Nsight Compute on the device (after `device-run.sh quick`, which
# leaves the harness at /tmp/gh and the bundle at /tmp/q.bundle), plus, optionally, a torch peer's
# kernels under the same flags, so the two read side by side: DRAM throughput, achieved occupancy,
# warp stall reasons and the source-level (SASS) stall sampling.
#
#   NCU_OPS     the op of the call (gpu-harness launches --ops)
#   NCU_CALL    a substring of the call's name (gpu-harness launches --calls)
#   NCU_KERNEL  ncu's kernel filter, e.g. regex:qkv_split_last
#   NCU_COUNT   launches profiled (default 2)
#   NCU_PEER    optional python statement(s) run under ncu with `torch`, `F` and `x`/`w` left to it,
#               with NCU_PEER_KERNEL its kernel filter (default: every kernel)
# Results: $OUT/ncu/{call,peer}.{ncu-rep,details.txt,source.csv}.
set -u
: "${OUT:?}" "${NCU_OPS:?}" "${NCU_CALL:?}" "${NCU_KERNEL:?}"
N=$OUT/ncu
mkdir -p "$N"
# The device tool's machines must keep their clocks (METHOD.md): --clock-control none.
flags=(--clock-control none --set full --import-source no --launch-count "${NCU_COUNT:-2}")
report() {
  local name=$1
  ncu --import "$N/$name.ncu-rep" --page details >"$N/$name.details.txt" 2>&1
  ncu --import "$N/$name.ncu-rep" --page source --csv --print-source sass >"$N/$name.source.csv" 2>&1
  grep -E 'Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Waves Per SM|Grid Size|Block Size' \
    "$N/$name.details.txt" | head -n 40
}
timeout -k 5 "${NCU_BUDGET:-150}" ncu "${flags[@]}" -k "$NCU_KERNEL" -o "$N/call" -f \
  /tmp/gh launches --bundle /tmp/q.bundle --out /tmp/ncu-launches --ops "$NCU_OPS" \
  --calls "$NCU_CALL" --iterations 1 >"$N/call.log" 2>&1
echo "ncu call: exit $?"
report call
if [ -n "${NCU_PEER:-}" ]; then
  timeout -k 5 "${NCU_BUDGET:-150}" ncu "${flags[@]}" ${NCU_PEER_KERNEL:+-k "$NCU_PEER_KERNEL"} \
    -o "$N/peer" -f python3 -c "import torch, torch.nn.functional as F
$NCU_PEER" >"$N/peer.log" 2>&1
  echo "ncu peer: exit $?"
  report peer
fi
