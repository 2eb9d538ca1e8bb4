global private  constant @gbl alignment = 16 <f32: [1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tile<4xf32>
entry @e5(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) {
  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %assume_0 = assume bounded<?, 100>, %arg1 : tile<i32>
  %assume_1 = assume bounded<-5, 7>, %arg1 : tile<i32>
  %assume_2 = assume bounded<?, ?>, %arg1 : tile<i32>
  %0 = iota : tile<8xi32>
  %reshape = reshape %0 : tile<8xi32> -> tile<2x4xi32>
  %assume_reshape = assume div_by<4, every 2 along 1>, %reshape : tile<2x4xi32>
  %1 = get_global @gbl : tile<ptr<f32>>
  %2 = alloca num_elem = 16, alignment = 8 : tile<ptr<f32>>
  %3 = alloca num_elem = 16, alignment = 8 global : tile<ptr<f32>>
  %cst_1_f16 = constant <f16: 1.000000e+00> : tile<64x16xf16>
  %cst_1_f16_3 = constant <f16: 1.000000e+00> : tile<16x64xf16>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<64x64xf32>
  %4 = mmaf %cst_1_f16, %cst_1_f16_3, %cst_0_f32 fast_acc : tile<64x16xf16>, tile<16x64xf16>, tile<64x64xf32>
  %cst_1_i8 = constant <i8: 1> : tile<64x32xi8>
  %cst_1_i8_4 = constant <i8: 1> : tile<32x64xi8>
  %cst_0_i32 = constant <i32: 0> : tile<64x64xi32>
  %5 = mmai %cst_1_i8, %cst_1_i8_4, %cst_0_i32 signed unsigned : tile<64x32xi8>, tile<32x64xi8>, tile<64x64xi32>
  %cst_1_f16_5 = constant <f16: 1.000000e+00> : tile<4xf16>
  %6 = pack %cst_1_f16_5 : tile<4xf16> -> tile<8xi8>
  %7 = unpack %6 : tile<8xi8> -> tile<4xf16>
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg1, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %gsview = make_gather_scatter_view %tview : gather_scatter_view<tile=(4x8), padding_value = zero, tensor_view<?x?xf32, strides=[?,1]>, sparse_dim=0>
  %sview = make_strided_view %tview : strided_view<tile=(4x8), traversal_strides=[2,1], padding_value = pos_inf, tensor_view<?x?xf32, strides=[?,1]>>
  %sview_6 = make_strided_view %tview : strided_view<tile=(4x8), traversal_strides=[2,1], tensor_view<?x?xf32, strides=[?,1]>, dim_map=[1, 0]>
  %gsview_7 = make_gather_scatter_view %tview : gather_scatter_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1]>, sparse_dim=1>
  return
}
