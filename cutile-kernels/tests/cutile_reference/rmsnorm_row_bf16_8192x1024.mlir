entry @rmsnorm_row_bf16_8192x1024(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<bf16>>, %arg11: tile<i32>, %arg12: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<bf16>>
  %assume_0 = assume div_by<16>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<bf16>>
  %assume_2 = assume div_by<16>, %arg8 : tile<i32>
  %assume_3 = assume div_by<16>, %arg10 : tile<ptr<bf16>>
  %cst_1_i64 = constant <i64: 1> : tile<1024xi64>
  %cst_1_i64_4 = constant <i64: 1> : tile<1024xi64>
  %cst_1_i64_5 = constant <i64: 1> : tile<1024xi64>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_6 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %cst_f32 = constant <f32: 9.99999997E-7> : tile<f32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %1 = iota : tile<1024xi32>
  %2 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape = reshape %2 : tile<i64> -> tile<1xi64>
  %bcast = broadcast %reshape : tile<1xi64> -> tile<1024xi64>
  %3 = exti %assume_assume signed : tile<i32> -> tile<i64>
  %reshape_7 = reshape %3 : tile<i64> -> tile<1xi64>
  %bcast_8 = broadcast %reshape_7 : tile<1xi64> -> tile<1024xi64>
  %4 = muli %bcast, %bcast_8 : tile<1024xi64>
  %5 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %6 = muli %5, %cst_1_i64 : tile<1024xi64>
  %7 = addi %4, %6 : tile<1024xi64>
  %reshape_9 = reshape %assume : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_10 = broadcast %reshape_9 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %8 = offset %bcast_10, %7 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %cst_0_bf16 = constant <bf16: 0.000000e+00> : tile<bf16>
  %reshape_11 = reshape %cst_0_bf16 : tile<bf16> -> tile<1xbf16>
  %bcast_12 = broadcast %reshape_11 : tile<1xbf16> -> tile<1024xbf16>
  %result, %result_token = load_ptr_tko weak %8, %bcast_12 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<bf16>>, tile<1024xbf16> -> tile<1024xbf16>, token
  %9 = ftof %result  : tile<1024xbf16> -> tile<1024xf32>
  %10 = mulf %9, %9  : tile<1024xf32>
  %reduce = reduce %10 dim=0 identities=[0.000000e+00 : f32] : tile<1024xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %29 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %29 : tile<f32>
  }
  %cst_1024_f32 = constant <f32: 1.024000e+03> : tile<f32>
  %11 = divf %reduce, %cst_1024_f32  : tile<f32>
  %12 = addf %11, %cst_f32  : tile<f32>
  %13 = rsqrt %12 : tile<f32>
  %14 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %15 = muli %14, %cst_1_i64_4 : tile<1024xi64>
  %reshape_13 = reshape %assume_3 : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_14 = broadcast %reshape_13 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %16 = offset %bcast_14, %15 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %cst_0_bf16_15 = constant <bf16: 0.000000e+00> : tile<bf16>
  %reshape_16 = reshape %cst_0_bf16_15 : tile<bf16> -> tile<1xbf16>
  %bcast_17 = broadcast %reshape_16 : tile<1xbf16> -> tile<1024xbf16>
  %result_18, %result_token_19 = load_ptr_tko weak %16, %bcast_17 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<bf16>>, tile<1024xbf16> -> tile<1024xbf16>, token
  %17 = ftof %result_18  : tile<1024xbf16> -> tile<1024xf32>
  %reshape_20 = reshape %13 : tile<f32> -> tile<1xf32>
  %bcast_21 = broadcast %reshape_20 : tile<1xf32> -> tile<1024xf32>
  %18 = mulf %9, %bcast_21  : tile<1024xf32>
  %19 = mulf %18, %17  : tile<1024xf32>
  %20 = ftof %19  : tile<1024xf32> -> tile<1024xbf16>
  %21 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape_22 = reshape %21 : tile<i64> -> tile<1xi64>
  %bcast_23 = broadcast %reshape_22 : tile<1xi64> -> tile<1024xi64>
  %22 = exti %assume_assume_6 signed : tile<i32> -> tile<i64>
  %reshape_24 = reshape %22 : tile<i64> -> tile<1xi64>
  %bcast_25 = broadcast %reshape_24 : tile<1xi64> -> tile<1024xi64>
  %23 = muli %bcast_23, %bcast_25 : tile<1024xi64>
  %24 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %25 = muli %24, %cst_1_i64_5 : tile<1024xi64>
  %26 = addi %23, %25 : tile<1024xi64>
  %reshape_26 = reshape %assume_1 : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_27 = broadcast %reshape_26 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %27 = offset %bcast_27, %26 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %28 = store_ptr_tko weak %27, %20 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<bf16>>, tile<1024xbf16> -> token
  return
}
