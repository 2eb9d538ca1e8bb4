entry @matmul_bf16_4096_128x256x64_nww8(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<bf16>>, %arg11: tile<i32>, %arg12: tile<i32>, %arg13: tile<i32>, %arg14: tile<i32>) optimization_hints=<default = {num_worker_warps_per_cta = 8, occupancy = 1}> {
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
  %assume_9 = assume div_by<16>, %arg12 : tile<i32>
  %assume_10 = assume div_by<16>, %arg13 : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_1_i32_11 = constant <i32: 1> : tile<i32>
  %cst_1_i32_12 = constant <i32: 1> : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_assume = assume div_by<16>, %assume_assume : tile<i32>
  %assume_assume_13 = assume bounded<0, ?>, %assume_1 : tile<i32>
  %assume_assume_assume_14 = assume div_by<16>, %assume_assume_13 : tile<i32>
  %assume_assume_15 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %assume_assume_assume_16 = assume div_by<16>, %assume_assume_15 : tile<i32>
  %tview = make_tensor_view %assume, shape = [%assume_assume_assume, %assume_assume_assume_14], strides = [%assume_assume_assume_16, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_17 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_assume_18 = assume div_by<16>, %assume_assume_17 : tile<i32>
  %assume_assume_19 = assume bounded<0, ?>, %assume_5 : tile<i32>
  %assume_assume_assume_20 = assume div_by<16>, %assume_assume_19 : tile<i32>
  %assume_assume_21 = assume bounded<0, ?>, %assume_6 : tile<i32>
  %assume_assume_assume_22 = assume div_by<16>, %assume_assume_21 : tile<i32>
  %tview_23 = make_tensor_view %assume_3, shape = [%assume_assume_assume_18, %assume_assume_assume_20], strides = [%assume_assume_assume_22, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %assume_assume_24 = assume bounded<0, ?>, %assume_8 : tile<i32>
  %assume_assume_assume_25 = assume div_by<16>, %assume_assume_24 : tile<i32>
  %assume_assume_26 = assume bounded<0, ?>, %assume_9 : tile<i32>
  %assume_assume_assume_27 = assume div_by<16>, %assume_assume_26 : tile<i32>
  %assume_assume_28 = assume bounded<0, ?>, %assume_10 : tile<i32>
  %assume_assume_assume_29 = assume div_by<16>, %assume_assume_28 : tile<i32>
  %tview_30 = make_tensor_view %assume_7, shape = [%assume_assume_assume_25, %assume_assume_assume_27], strides = [%assume_assume_assume_29, 1] : tile<i32> -> tensor_view<?x?xbf16, strides=[?,1]>
  %cst_128_i32 = constant <i32: 128> : tile<i32>
  %cst_256_i32 = constant <i32: 256> : tile<i32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %1 = divi %assume_assume_assume, %cst_128_i32 signed rounding<positive_inf> : tile<i32>
  %2 = divi %assume_assume_assume_20, %cst_256_i32 signed rounding<positive_inf> : tile<i32>
  %cst_8_i32 = constant <i32: 8> : tile<i32>
  %3 = muli %cst_8_i32, %2 : tile<i32>
  %4 = divi %blockId_x, %3 signed rounding<negative_inf> : tile<i32>
  %5 = muli %4, %cst_8_i32 : tile<i32>
  %6 = subi %1, %5 : tile<i32>
  %7 = mini %6, %cst_8_i32 signed : tile<i32>
  %8 = remi %blockId_x, %7 signed : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %9 = cmpi less_than %8, %cst_0_i32, signed : tile<i32> -> tile<i1>
  %10 = cmpi less_than %7, %cst_0_i32, signed : tile<i32> -> tile<i1>
  %11 = xori %9, %10 : tile<i1>
  %12 = cmpi not_equal %8, %cst_0_i32, signed : tile<i32> -> tile<i1>
  %13 = andi %11, %12 : tile<i1>
  %14 = addi %8, %7 : tile<i32>
  %15 = select %13, %14, %8 : tile<i1>, tile<i32>
  %16 = addi %5, %15 : tile<i32>
  %17 = remi %blockId_x, %3 signed : tile<i32>
  %cst_0_i32_31 = constant <i32: 0> : tile<i32>
  %18 = cmpi less_than %17, %cst_0_i32_31, signed : tile<i32> -> tile<i1>
  %19 = cmpi less_than %3, %cst_0_i32_31, signed : tile<i32> -> tile<i1>
  %20 = xori %18, %19 : tile<i1>
  %21 = cmpi not_equal %17, %cst_0_i32_31, signed : tile<i32> -> tile<i1>
  %22 = andi %20, %21 : tile<i1>
  %23 = addi %17, %3 : tile<i32>
  %24 = select %22, %23, %17 : tile<i1>, tile<i32>
  %25 = divi %24, %7 signed rounding<negative_inf> : tile<i32>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<128x256xf32>
  %pview = make_partition_view %tview : partition_view<tile=(128x64), tensor_view<?x?xbf16, strides=[?,1]>>
  %26:2 = get_index_space_shape %pview : partition_view<tile=(128x64), tensor_view<?x?xbf16, strides=[?,1]>> -> tile<i32>
  %cst_0_i32_32 = constant <i32: 0> : tile<i32>
  %cst_1_i32_33 = constant <i32: 1> : tile<i32>
  %pview_34 = make_partition_view %tview : partition_view<tile=(128x64), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>
  %pview_35 = make_partition_view %tview_23 : partition_view<tile=(64x256), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>
  %for = for %loopIdx in (%cst_0_i32_32 to %26#1, step %cst_1_i32_33) : tile<i32> iter_values(%iterArg0 = %cst_0_f32) -> (tile<128x256xf32>) {
    %tile, %result_token = load_view_tko weak %pview_34[%16, %loopIdx] token = %0 : partition_view<tile=(128x64), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> tile<128x64xbf16>, token
    %tile_37, %result_token_38 = load_view_tko weak %pview_35[%loopIdx, %25] token = %0 : partition_view<tile=(64x256), padding_value = zero, tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> tile<64x256xbf16>, token
    %29 = mmaf %tile, %tile_37, %iterArg0 : tile<128x64xbf16>, tile<64x256xbf16>, tile<128x256xf32>
    continue %29 : tile<128x256xf32>
  }
  %27 = ftof %for  : tile<128x256xf32> -> tile<128x256xbf16>
  %pview_36 = make_partition_view %tview_30 : partition_view<tile=(128x256), tensor_view<?x?xbf16, strides=[?,1]>>
  %28 = store_view_tko weak %27, %pview_36[%16, %25] token = %0 : tile<128x256xbf16>, partition_view<tile=(128x256), tensor_view<?x?xbf16, strides=[?,1]>>, tile<i32> -> token
  return
}
