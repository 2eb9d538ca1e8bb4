global  @g1 <i32: [1, 2]> : tile<2xi32>
global  constant @g2 alignment = 4 <i32: [1, 2]> : tile<2xi32>
entry @e6(%arg0: tile<ptr<f32, <multicast>>>, %arg1: tile<i32>) optimization_hints=<default = {}> {
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg1, 1] : tile<ptr<f32, <multicast>>>, tile<i32> -> tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>
  %pview = make_partition_view %tview : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>
  %0 = make_token : token
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %reduced_values, %result_token = multimem_load_reduce_view_tko relaxed sys %pview[%cst_0_i32, %cst_0_i32] token = %0 inbounds = [true, false] : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<i32>, token -> tile<4x8xf32>, token
  %reduced_values_0, %result_token_1 = multimem_load_reduce_view_tko weak %pview[%cst_0_i32, %cst_0_i32]  : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<i32> -> tile<4x8xf32>, token
  %1 = multimem_reduce_view_tko relaxed sys %pview, %reduced_values[%cst_0_i32, %cst_0_i32] token = %0 inbounds = [false, true] : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<4x8xf32>, tile<i32>, token -> token
  %2 = multimem_store_view_tko relaxed sys %pview, %reduced_values[%cst_0_i32, %cst_0_i32] token = %0  : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<4x8xf32>, tile<i32>, token -> token
  %3 = multimem_store_view_tko weak %pview, %reduced_values[%cst_0_i32, %cst_0_i32] inbounds = [true, true] : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<4x8xf32>, tile<i32> -> token
  return
}
