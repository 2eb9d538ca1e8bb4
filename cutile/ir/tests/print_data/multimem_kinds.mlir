entry @e7(%arg0: tile<ptr<f16, <multicast>>>, %arg1: tile<i32>) {
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg1, 1] : tile<ptr<f16, <multicast>>>, tile<i32> -> tensor_view<?x?xf16, strides=[?,1], #cuda_tile.ptr_attr<multicast>>
  %tview_0 = make_tensor_view %arg0, shape = [8, 8], strides = [8, 1] : tile<ptr<f16, <multicast>>> -> tensor_view<8x8xf16, strides=[8,1], #cuda_tile.ptr_attr<multicast>>
  %pview = make_partition_view %tview : partition_view<tile=(4x8), tensor_view<?x?xf16, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>
  %0 = make_token : token
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %reduced_values, %result_token = multimem_load_reduce_view_tko relaxed sys %pview[%cst_0_i32, %cst_0_i32]  attributes {reduction = #cuda_tile.multimem_reduction_kind<max>} : partition_view<tile=(4x8), tensor_view<?x?xf16, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<i32> -> tile<4x8xf16>, token
  %reduced_values_1, %result_token_2 = multimem_load_reduce_view_tko relaxed sys %pview[%cst_0_i32, %cst_0_i32]  attributes {reduction = #cuda_tile.multimem_reduction_kind<min>} : partition_view<tile=(4x8), tensor_view<?x?xf16, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<i32> -> tile<4x8xf16>, token
  %1 = multimem_reduce_view_tko relaxed sys %pview, %reduced_values[%cst_0_i32, %cst_0_i32] token = %0  : partition_view<tile=(4x8), tensor_view<?x?xf16, strides=[?,1], #cuda_tile.ptr_attr<multicast>>>, tile<4x8xf16>, tile<i32>, token -> token
  return
}
