entry @layernorm_persist_bf16_16384x8192(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<bf16>>, %arg11: tile<i32>, %arg12: tile<i32>, %arg13: tile<ptr<bf16>>, %arg14: tile<i32>, %arg15: tile<i32>) optimization_hints=<default = {}> {
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
  %assume_9 = assume div_by<16>, %arg13 : tile<ptr<bf16>>
  %assume_10 = assume div_by<16>, %arg14 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_11 = constant <i32: 1> : tile<i32>
  %cst_1_i32_12 = constant <i32: 1> : tile<i32>
  %cst_1_i32_13 = constant <i32: 1> : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<16>, %assume_assume : tile<i32>
  %assume_assume_14 = assume bounded<0, ?>, %assume_1 : tile<i32>
  %assume_assume_assume_15 = assume div_by<16>, %assume_assume_14 : tile<i32>
  %assume_assume_16 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %assume_assume_assume_17 = assume div_by<16>, %assume_assume_16 : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_assume_assume, %assume_assume_assume_15], strides = [%assume_assume_assume_17, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_18 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_assume_19 = assume div_by<16>, %assume_assume_18 : tile<i32>
  %assume_assume_20 = assume bounded<0, ?>, %assume_5 : tile<i32>
  %assume_assume_assume_21 = assume div_by<16>, %assume_assume_20 : tile<i32>
  %assume_assume_22 = assume bounded<0, ?>, %assume_6 : tile<i32>
  %assume_assume_assume_23 = assume div_by<16>, %assume_assume_22 : tile<i32>
  %tview_24 = make_tensor_view %assume_3, shape = [%assume_assume_assume_19, %assume_assume_assume_21], strides = [%assume_assume_assume_23, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_25 = assume bounded<0, ?>, %assume_8 : tile<i32>
  %assume_assume_assume_26 = assume div_by<16>, %assume_assume_25 : tile<i32>
  %tview_27 = make_tensor_view %assume_7, shape = [%assume_assume_assume_26], strides = [1] : tile<i32> -> tensor_view<?xbf16, strides=[1]>
  %assume_assume_28 = assume bounded<0, ?>, %assume_10 : tile<i32>
  %assume_assume_assume_29 = assume div_by<16>, %assume_assume_28 : tile<i32>
  %tview_30 = make_tensor_view %assume_9, shape = [%assume_assume_assume_29], strides = [1] : tile<i32> -> tensor_view<?xbf16, strides=[1]>
  %cst_f32 = constant <f32: 9.99999974E-6> : tile<f32>
  %cst_2_i32 = constant <i32: 2> : tile<i32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %gridSize_x, %gridSize_y, %gridSize_z = get_num_tile_blocks : tile<i32>
  %1 = divi %assume_assume_assume, %cst_2_i32 signed rounding<positive_inf> : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %pview = make_partition_view %tview_27 : partition_view<tile=(8192), padding_value = zero, tensor_view<?xbf16, strides=[1]>>
  %tile, %result_token = load_view_tko weak %pview[%cst_0_i32] token = %0 : partition_view<tile=(8192), padding_value = zero, tensor_view<?xbf16, strides=[1]>>, tile<i32> -> tile<8192xbf16>, token
  %2 = ftof %tile  : tile<8192xbf16> -> tile<8192xf32>
  %cst_0_i32_31 = constant <i32: 0> : tile<i32>
  %pview_32 = make_partition_view %tview_30 : partition_view<tile=(8192), padding_value = zero, tensor_view<?xbf16, strides=[1]>>
  %tile_33, %result_token_34 = load_view_tko weak %pview_32[%cst_0_i32_31] token = %0 : partition_view<tile=(8192), padding_value = zero, tensor_view<?xbf16, strides=[1]>>, tile<i32> -> tile<8192xbf16>, token
  %3 = ftof %tile_33  : tile<8192xbf16> -> tile<8192xf32>
  %cst_0_i32_35 = constant <i32: 0> : tile<i32>
  %pview_36 = make_partition_view %tview : partition_view<tile=(2x8192), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>
  %cst_8192_f32 = constant <f32: 8.192000e+03> : tile<f32>
  %reshape = reshape %cst_8192_f32 : tile<f32> -> tile<1x1xf32>
  %bcast = broadcast %reshape : tile<1x1xf32> -> tile<2x1xf32>
  %cst_8192_f32_37 = constant <f32: 8.192000e+03> : tile<f32>
  %reshape_38 = reshape %cst_8192_f32_37 : tile<f32> -> tile<1x1xf32>
  %bcast_39 = broadcast %reshape_38 : tile<1x1xf32> -> tile<2x1xf32>
  %reshape_40 = reshape %cst_f32 : tile<f32> -> tile<1x1xf32>
  %bcast_41 = broadcast %reshape_40 : tile<1x1xf32> -> tile<2x1xf32>
  %reshape_42 = reshape %2 : tile<8192xf32> -> tile<1x8192xf32>
  %bcast_43 = broadcast %reshape_42 : tile<1x8192xf32> -> tile<2x8192xf32>
  %reshape_44 = reshape %3 : tile<8192xf32> -> tile<1x8192xf32>
  %bcast_45 = broadcast %reshape_44 : tile<1x8192xf32> -> tile<2x8192xf32>
  %cst_0_i32_46 = constant <i32: 0> : tile<i32>
  %pview_47 = make_partition_view %tview_24 : partition_view<tile=(2x8192), tensor_view<?x?xbf16, strides=[?,1]>>
  for %loopIdx in (%blockId_x to %1, step %gridSize_x) : tile<i32> {
    %tile_48, %result_token_49 = load_view_tko weak %pview_36[%loopIdx, %cst_0_i32_35] token = %0 optimization_hints = <default = {latency = 4}> : partition_view<tile=(2x8192), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> tile<2x8192xbf16>, token
    %4 = ftof %tile_48  : tile<2x8192xbf16> -> tile<2x8192xf32>
    %reduce = reduce %4 dim=1 identities=[0.000000e+00 : f32] : tile<2x8192xf32> -> tile<2xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %15 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
      yield %15 : tile<f32>
    }
    %reshape_50 = reshape %reduce : tile<2xf32> -> tile<2x1xf32>
    %5 = divf %reshape_50, %bcast  : tile<2x1xf32>
    %bcast_51 = broadcast %5 : tile<2x1xf32> -> tile<2x8192xf32>
    %6 = subf %4, %bcast_51  : tile<2x8192xf32>
    %7 = mulf %6, %6  : tile<2x8192xf32>
    %reduce_52 = reduce %7 dim=1 identities=[0.000000e+00 : f32] : tile<2x8192xf32> -> tile<2xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %15 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
      yield %15 : tile<f32>
    }
    %reshape_53 = reshape %reduce_52 : tile<2xf32> -> tile<2x1xf32>
    %8 = divf %reshape_53, %bcast_39  : tile<2x1xf32>
    %9 = addf %8, %bcast_41  : tile<2x1xf32>
    %10 = rsqrt %9 : tile<2x1xf32>
    %bcast_54 = broadcast %10 : tile<2x1xf32> -> tile<2x8192xf32>
    %11 = mulf %6, %bcast_54  : tile<2x8192xf32>
    %12 = fma %11, %bcast_43, %bcast_45  : tile<2x8192xf32>
    %13 = ftof %12  : tile<2x8192xf32> -> tile<2x8192xbf16>
    %14 = store_view_tko weak %13, %pview_47[%loopIdx, %cst_0_i32_46] token = %0 optimization_hints = <default = {allow_tma = false}> : tile<2x8192xbf16>, partition_view<tile=(2x8192), tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> token
  }
  return
}
