entry @rmsnorm_persist_bf16_4096x4096(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<bf16>>, %arg11: tile<i32>, %arg12: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<bf16>>
  %assume_0 = assume div_by<16>, %arg1 : tile<i32>
  %assume_1 = assume div_by<16>, %arg2 : tile<i32>
  %assume_2 = assume div_by<16>, %arg3 : tile<i32>
  %assume_3 = assume div_by<16>, %arg5 : tile<ptr<bf16>>
  %assume_4 = assume div_by<16>, %arg6 : tile<i32>
  %assume_5 = assume div_by<16>, %arg7 : tile<i32>
  %assume_6 = assume div_by<16>, %arg8 : tile<i32>
  %assume_7 = assume div_by<16>, %arg10 : tile<ptr<bf16>>
  %assume_8 = assume div_by<16>, %arg11 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_9 = constant <i32: 1> : tile<i32>
  %cst_1_i32_10 = constant <i32: 1> : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<16>, %assume_assume : tile<i32>
  %assume_assume_11 = assume bounded<0, ?>, %assume_1 : tile<i32>
  %assume_assume_assume_12 = assume div_by<16>, %assume_assume_11 : tile<i32>
  %assume_assume_13 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %assume_assume_assume_14 = assume div_by<16>, %assume_assume_13 : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_assume_assume, %assume_assume_assume_12], strides = [%assume_assume_assume_14, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_15 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_assume_16 = assume div_by<16>, %assume_assume_15 : tile<i32>
  %assume_assume_17 = assume bounded<0, ?>, %assume_5 : tile<i32>
  %assume_assume_assume_18 = assume div_by<16>, %assume_assume_17 : tile<i32>
  %assume_assume_19 = assume bounded<0, ?>, %assume_6 : tile<i32>
  %assume_assume_assume_20 = assume div_by<16>, %assume_assume_19 : tile<i32>
  %tview_21 = make_tensor_view %assume_3, shape = [%assume_assume_assume_16, %assume_assume_assume_18], strides = [%assume_assume_assume_20, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_22 = assume bounded<0, ?>, %assume_8 : tile<i32>
  %assume_assume_assume_23 = assume div_by<16>, %assume_assume_22 : tile<i32>
  %tview_24 = make_tensor_view %assume_7, shape = [%assume_assume_assume_23], strides = [1] : tile<i32> -> tensor_view<?xbf16, strides=[1]>
  %cst_4_i32 = constant <i32: 4> : tile<i32>
  %cst_f32 = constant <f32: 9.99999997E-7> : tile<f32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %1 = addi %assume_assume_assume, %cst_4_i32 : tile<i32>
  %cst_1_i32_25 = constant <i32: 1> : tile<i32>
  %2 = subi %1, %cst_1_i32_25 : tile<i32>
  %3 = divi %2, %cst_4_i32 signed rounding<negative_inf> : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %pview = make_partition_view %tview_24 : partition_view<tile=(4096), padding_value = zero, tensor_view<?xbf16, strides=[1]>>
  %tile, %result_token = load_view_tko weak %pview[%cst_0_i32] token = %0 : partition_view<tile=(4096), padding_value = zero, tensor_view<?xbf16, strides=[1]>>, tile<i32> -> tile<4096xbf16>, token
  %4 = ftof %tile  : tile<4096xbf16> -> tile<4096xf32>
  %reshape = reshape %4 : tile<4096xf32> -> tile<1x4096xf32>
  %gridSize_x, %gridSize_y, %gridSize_z = get_num_tile_blocks : tile<i32>
  %cst_0_i32_26 = constant <i32: 0> : tile<i32>
  %pview_27 = make_partition_view %tview : partition_view<tile=(4x4096), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>
  %cst_1_f32 = constant <f32: 1.000000e+00> : tile<f32>
  %5 = itof %assume_assume_assume_12 signed  : tile<i32> -> tile<f32>
  %6 = mulf %5, %cst_1_f32  : tile<f32>
  %reshape_28 = reshape %6 : tile<f32> -> tile<1x1xf32>
  %bcast = broadcast %reshape_28 : tile<1x1xf32> -> tile<4x1xf32>
  %reshape_29 = reshape %cst_f32 : tile<f32> -> tile<1x1xf32>
  %bcast_30 = broadcast %reshape_29 : tile<1x1xf32> -> tile<4x1xf32>
  %bcast_31 = broadcast %reshape : tile<1x4096xf32> -> tile<4x4096xf32>
  %cst_0_i32_32 = constant <i32: 0> : tile<i32>
  %pview_33 = make_partition_view %tview_21 : partition_view<tile=(4x4096), tensor_view<?x?xbf16, strides=[?,1]>>
  for %loopIdx in (%blockId_x to %3, step %gridSize_x) : tile<i32> {
    %tile_34, %result_token_35 = load_view_tko weak %pview_27[%loopIdx, %cst_0_i32_26] token = %0 optimization_hints = <default = {latency = 10}> : partition_view<tile=(4x4096), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> tile<4x4096xbf16>, token
    %7 = ftof %tile_34  : tile<4x4096xbf16> -> tile<4x4096xf32>
    %8 = mulf %7, %7  : tile<4x4096xf32>
    %reduce = reduce %8 dim=1 identities=[0.000000e+00 : f32] : tile<4x4096xf32> -> tile<4xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %16 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
      yield %16 : tile<f32>
    }
    %reshape_36 = reshape %reduce : tile<4xf32> -> tile<4x1xf32>
    %9 = divf %reshape_36, %bcast  : tile<4x1xf32>
    %10 = addf %9, %bcast_30  : tile<4x1xf32>
    %11 = rsqrt %10 : tile<4x1xf32>
    %bcast_37 = broadcast %11 : tile<4x1xf32> -> tile<4x4096xf32>
    %12 = mulf %7, %bcast_37  : tile<4x4096xf32>
    %13 = mulf %12, %bcast_31  : tile<4x4096xf32>
    %14 = ftof %13  : tile<4x4096xf32> -> tile<4x4096xbf16>
    %15 = store_view_tko weak %14, %pview_33[%loopIdx, %cst_0_i32_32] token = %0 optimization_hints = <default = {allow_tma = false, latency = 3}> : tile<4x4096xbf16>, partition_view<tile=(4x4096), tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> token
  }
  return
}
