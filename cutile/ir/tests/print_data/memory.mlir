entry @e3(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i64>) optimization_hints=<sm_100 = {num_cta_in_cga = 2, occupancy = 4}, sm_90 = {num_worker_warps_per_cta = 8}> {
  %tview = make_tensor_view %arg0, shape = [%arg1, 16], strides = [%arg1, 1] : tile<i32> -> tensor_view<?x16xf32, strides=[?,1]>
  %tview_0 = make_tensor_view %arg0, shape = [32, 16], strides = [16, 1] : tensor_view<32x16xf32, strides=[16,1]>
  %tview_1 = make_tensor_view %arg0, shape = [], strides = [] : tensor_view<f32>
  %tview_2 = make_tensor_view %arg0, shape = [%arg2, %arg2], strides = [%arg2, 1] : tile<i64> -> tensor_view<?x?xf32, strides=[?,1]>
  %pview = make_partition_view %tview_0 : partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]>
  %0:2 = get_tensor_shape %tview_0 : tensor_view<32x16xf32, strides=[16,1]> -> tile<i32>
  %1:2 = get_index_space_shape %pview : partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]> -> tile<i64>
  %gridSize_x, %gridSize_y, %gridSize_z = get_num_tile_blocks : tile<i32>
  %2 = make_token : token
  %tile, %result_token = load_view_tko relaxed device %pview[%gridSize_x, %gridSize_y] optimization_hints = <sm_100 = {allow_tma = false, latency = 3}> inbounds = [true, false] : partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]>, tile<i32> -> tile<4x4xf32>, token
  %tile_3, %result_token_4 = load_view_tko weak %pview[%gridSize_x, %gridSize_y] token = %2 : partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]>, tile<i32> -> tile<4x4xf32>, token
  %3 = store_view_tko release sys %tile, %pview[%gridSize_x, %gridSize_y] token = %result_token optimization_hints = <sm_100 = {allow_tma = false, latency = 3}> inbounds = [false, true] : tile<4x4xf32>, partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]>, tile<i32> -> token
  %4 = store_view_tko weak %tile, %pview[%gridSize_x, %gridSize_y] : tile<4x4xf32>, partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]>, tile<i32> -> token
  %reshape = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %bcast = broadcast %reshape : tile<1xptr<f32>> -> tile<4xptr<f32>>
  %5 = iota : tile<4xi32>
  %6 = offset %bcast, %5 : tile<4xptr<f32>>, tile<4xi32> -> tile<4xptr<f32>>
  %true = constant <i1: true> : tile<4xi1>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<4xf32>
  %result, %result_token_5 = load_ptr_tko weak %6, %true, %cst_0_f32 token=%2 optimization_hints = <sm_100 = {allow_tma = false, latency = 3}> : tile<4xptr<f32>>, tile<4xi1>, tile<4xf32> -> tile<4xf32>, token
  %result_6, %result_token_7 = load_ptr_tko acquire tl_blk %6 : tile<4xptr<f32>> -> tile<4xf32>, token
  %7 = store_ptr_tko weak %6, %result, %true token=%2 : tile<4xptr<f32>>, tile<4xf32>, tile<4xi1> -> token
  %8 = store_ptr_tko relaxed device %6, %result optimization_hints = <sm_100 = {allow_tma = false, latency = 3}> : tile<4xptr<f32>>, tile<4xf32> -> token
  %result_8, %result_token_9 = atomic_rmw_tko relaxed device %6, addf, %result, %true token=%2 : tile<4xptr<f32>>, tile<4xf32>, tile<4xi1> -> tile<4xf32>, token
  %result_10, %result_token_11 = atomic_rmw_tko acq_rel sys %6, xchg, %result : tile<4xptr<f32>>, tile<4xf32> -> tile<4xf32>, token
  %result_12, %result_token_13 = atomic_cas_tko acquire tl_blk %6, %result, %result_6, %true token=%2 : tile<4xptr<f32>>, tile<4xf32>, tile<4xi1> -> tile<4xf32>, token
  %result_14, %result_token_15 = atomic_cas_tko relaxed device %6, %result, %result_6 : tile<4xptr<f32>>, tile<4xf32> -> tile<4xf32>, token
  %9 = join_tokens %2, %result_token, %result_token_5 : token
  %10 = print_tko "x=%d y=%ld\0A", %arg1, %arg2 token=%9 : tile<i32>, tile<i64> -> token
  %11 = print_tko "hi" -> token
  %12 = atomic_red_view_tko relaxed device %pview[%gridSize_x, %gridSize_y], addf, %tile token = %2 inbounds = [true, false] : tile<4x4xf32>, partition_view<tile=(4x4), padding_value = nan, tensor_view<32x16xf32, strides=[16,1]>, dim_map=[1, 0]>, tile<i32> -> token
  %13 = memory_fence_alias_tko %2
  %14 = gdc_wait_tko token = %2 -> token
  %15 = gdc_launch_dependents_tko -> token
  %16 = ptr_to_int %arg0 : tile<ptr<f32>> -> tile<i64>
  %17 = int_to_ptr %16 : tile<i64> -> tile<ptr<f32>>
  %18 = ptr_to_ptr %arg0 : tile<ptr<f32>> -> tile<ptr<f16>>
  return
}
