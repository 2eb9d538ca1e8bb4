entry @softmax_persist_bf16_8192x8192(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>) optimization_hints=<default = {occupancy = 2}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<bf16>>
  %assume_0 = assume div_by<16>, %arg1 : tile<i32>
  %assume_1 = assume div_by<16>, %arg2 : tile<i32>
  %assume_2 = assume div_by<16>, %arg3 : tile<i32>
  %assume_3 = assume div_by<16>, %arg5 : tile<ptr<bf16>>
  %assume_4 = assume div_by<16>, %arg6 : tile<i32>
  %assume_5 = assume div_by<16>, %arg7 : tile<i32>
  %assume_6 = assume div_by<16>, %arg8 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_7 = constant <i32: 1> : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<16>, %assume_assume : tile<i32>
  %assume_assume_8 = assume bounded<0, ?>, %assume_1 : tile<i32>
  %assume_assume_assume_9 = assume div_by<16>, %assume_assume_8 : tile<i32>
  %assume_assume_10 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %assume_assume_assume_11 = assume div_by<16>, %assume_assume_10 : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_assume_assume, %assume_assume_assume_9], strides = [%assume_assume_assume_11, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_12 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_assume_13 = assume div_by<16>, %assume_assume_12 : tile<i32>
  %assume_assume_14 = assume bounded<0, ?>, %assume_5 : tile<i32>
  %assume_assume_assume_15 = assume div_by<16>, %assume_assume_14 : tile<i32>
  %assume_assume_16 = assume bounded<0, ?>, %assume_6 : tile<i32>
  %assume_assume_assume_17 = assume div_by<16>, %assume_assume_16 : tile<i32>
  %tview_18 = make_tensor_view %assume_3, shape = [%assume_assume_assume_13, %assume_assume_assume_15], strides = [%assume_assume_assume_17, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %gridSize_x, %gridSize_y, %gridSize_z = get_num_tile_blocks : tile<i32>
  %cst_8192_i32 = constant <i32: 8192> : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %pview = make_partition_view %tview_18 : partition_view<tile=(1x8192), padding_value = neg_inf, tensor_view<?x?xbf16, strides=[?,1]>>
  %cst_0_i32_19 = constant <i32: 0> : tile<i32>
  %pview_20 = make_partition_view %tview : partition_view<tile=(1x8192), tensor_view<?x?xbf16, strides=[?,1]>>
  for %loopIdx in (%blockId_x to %cst_8192_i32, step %gridSize_x) : tile<i32> {
    %tile, %result_token = load_view_tko weak %pview[%loopIdx, %cst_0_i32] token = %0 : partition_view<tile=(1x8192), padding_value = neg_inf, tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> tile<1x8192xbf16>, token
    %1 = ftof %tile  : tile<1x8192xbf16> -> tile<1x8192xf32>
    %reduce = reduce %1 dim=1 identities=[0xFF800000 : f32] : tile<1x8192xf32> -> tile<1xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %7 = maxf %reduce_lhs, %reduce_rhs : tile<f32>
      yield %7 : tile<f32>
    }
    %reshape = reshape %reduce : tile<1xf32> -> tile<1x1xf32>
    %bcast = broadcast %reshape : tile<1x1xf32> -> tile<1x8192xf32>
    %2 = subf %1, %bcast  : tile<1x8192xf32>
    %3 = exp %2 rounding<approx> : tile<1x8192xf32>
    %reduce_21 = reduce %3 dim=1 identities=[0.000000e+00 : f32] : tile<1x8192xf32> -> tile<1xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %7 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
      yield %7 : tile<f32>
    }
    %reshape_22 = reshape %reduce_21 : tile<1xf32> -> tile<1x1xf32>
    %bcast_23 = broadcast %reshape_22 : tile<1x1xf32> -> tile<1x8192xf32>
    %4 = divf %3, %bcast_23 rounding<approx> flush_to_zero : tile<1x8192xf32>
    %5 = ftof %4  : tile<1x8192xf32> -> tile<1x8192xbf16>
    %6 = store_view_tko weak %5, %pview_20[%loopIdx, %cst_0_i32_19] token = %0 : tile<1x8192xbf16>, partition_view<tile=(1x8192), tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> token
  }
  return
}
