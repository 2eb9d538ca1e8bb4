entry @rmsnorm_row_f32_8192x1024(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<f32>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<f32>>, %arg11: tile<i32>, %arg12: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %assume_0 = assume div_by<16>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<f32>>
  %assume_2 = assume div_by<16>, %arg8 : tile<i32>
  %assume_3 = assume div_by<16>, %arg10 : tile<ptr<f32>>
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
  %reshape_9 = reshape %assume : tile<ptr<f32>> -> tile<1xptr<f32>>
  %bcast_10 = broadcast %reshape_9 : tile<1xptr<f32>> -> tile<1024xptr<f32>>
  %8 = offset %bcast_10, %7 : tile<1024xptr<f32>>, tile<1024xi64> -> tile<1024xptr<f32>>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<f32>
  %reshape_11 = reshape %cst_0_f32 : tile<f32> -> tile<1xf32>
  %bcast_12 = broadcast %reshape_11 : tile<1xf32> -> tile<1024xf32>
  %result, %result_token = load_ptr_tko weak %8, %bcast_12 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<f32>>, tile<1024xf32> -> tile<1024xf32>, token
  %9 = mulf %result, %result  : tile<1024xf32>
  %reduce = reduce %9 dim=0 identities=[0.000000e+00 : f32] : tile<1024xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %26 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %26 : tile<f32>
  }
  %cst_1024_f32 = constant <f32: 1.024000e+03> : tile<f32>
  %10 = divf %reduce, %cst_1024_f32  : tile<f32>
  %11 = addf %10, %cst_f32  : tile<f32>
  %12 = rsqrt %11 : tile<f32>
  %13 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %14 = muli %13, %cst_1_i64_4 : tile<1024xi64>
  %reshape_13 = reshape %assume_3 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %bcast_14 = broadcast %reshape_13 : tile<1xptr<f32>> -> tile<1024xptr<f32>>
  %15 = offset %bcast_14, %14 : tile<1024xptr<f32>>, tile<1024xi64> -> tile<1024xptr<f32>>
  %cst_0_f32_15 = constant <f32: 0.000000e+00> : tile<f32>
  %reshape_16 = reshape %cst_0_f32_15 : tile<f32> -> tile<1xf32>
  %bcast_17 = broadcast %reshape_16 : tile<1xf32> -> tile<1024xf32>
  %result_18, %result_token_19 = load_ptr_tko weak %15, %bcast_17 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<f32>>, tile<1024xf32> -> tile<1024xf32>, token
  %reshape_20 = reshape %12 : tile<f32> -> tile<1xf32>
  %bcast_21 = broadcast %reshape_20 : tile<1xf32> -> tile<1024xf32>
  %16 = mulf %result, %bcast_21  : tile<1024xf32>
  %17 = mulf %16, %result_18  : tile<1024xf32>
  %18 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape_22 = reshape %18 : tile<i64> -> tile<1xi64>
  %bcast_23 = broadcast %reshape_22 : tile<1xi64> -> tile<1024xi64>
  %19 = exti %assume_assume_6 signed : tile<i32> -> tile<i64>
  %reshape_24 = reshape %19 : tile<i64> -> tile<1xi64>
  %bcast_25 = broadcast %reshape_24 : tile<1xi64> -> tile<1024xi64>
  %20 = muli %bcast_23, %bcast_25 : tile<1024xi64>
  %21 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %22 = muli %21, %cst_1_i64_5 : tile<1024xi64>
  %23 = addi %20, %22 : tile<1024xi64>
  %reshape_26 = reshape %assume_1 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %bcast_27 = broadcast %reshape_26 : tile<1xptr<f32>> -> tile<1024xptr<f32>>
  %24 = offset %bcast_27, %23 : tile<1024xptr<f32>>, tile<1024xi64> -> tile<1024xptr<f32>>
  %25 = store_ptr_tko weak %24, %17 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<f32>>, tile<1024xf32> -> token
  return
}
