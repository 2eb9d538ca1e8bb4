entry @rmsnorm_row_bf16_37x1000(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<ptr<bf16>>, %arg11: tile<i32>, %arg12: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<bf16>>
  %assume_0 = assume div_by<8>, %arg2 : tile<i32>
  %assume_1 = assume div_by<8>, %arg3 : tile<i32>
  %assume_2 = assume div_by<16>, %arg5 : tile<ptr<bf16>>
  %assume_3 = assume div_by<8>, %arg7 : tile<i32>
  %assume_4 = assume div_by<8>, %arg8 : tile<i32>
  %assume_5 = assume div_by<16>, %arg10 : tile<ptr<bf16>>
  %assume_6 = assume div_by<8>, %arg11 : tile<i32>
  %cst_1_i64 = constant <i64: 1> : tile<1024xi64>
  %cst_1_i64_7 = constant <i64: 1> : tile<1024xi64>
  %cst_1_i64_8 = constant <i64: 1> : tile<1024xi64>
  %assume_9 = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_10 = assume bounded<0, ?>, %assume_1 : tile<i32>
  %assume_11 = assume bounded<0, ?>, %arg6 : tile<i32>
  %assume_assume_12 = assume bounded<0, ?>, %assume_3 : tile<i32>
  %assume_assume_13 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %assume_assume_14 = assume bounded<0, ?>, %assume_6 : tile<i32>
  %cst_f32 = constant <f32: 9.99999997E-7> : tile<f32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %1 = iota : tile<1024xi32>
  %2 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape = reshape %2 : tile<i64> -> tile<1xi64>
  %bcast = broadcast %reshape : tile<1xi64> -> tile<1024xi64>
  %3 = exti %assume_9 signed : tile<i32> -> tile<i64>
  %reshape_15 = reshape %3 : tile<i64> -> tile<1xi64>
  %bcast_16 = broadcast %reshape_15 : tile<1xi64> -> tile<1024xi64>
  %4 = cmpi less_than %bcast, %bcast_16, unsigned : tile<1024xi64> -> tile<1024xi1>
  %5 = exti %assume_assume_10 signed : tile<i32> -> tile<i64>
  %reshape_17 = reshape %5 : tile<i64> -> tile<1xi64>
  %bcast_18 = broadcast %reshape_17 : tile<1xi64> -> tile<1024xi64>
  %6 = muli %bcast, %bcast_18 : tile<1024xi64>
  %7 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %8 = exti %assume_assume signed : tile<i32> -> tile<i64>
  %reshape_19 = reshape %8 : tile<i64> -> tile<1xi64>
  %bcast_20 = broadcast %reshape_19 : tile<1xi64> -> tile<1024xi64>
  %9 = cmpi less_than %7, %bcast_20, unsigned : tile<1024xi64> -> tile<1024xi1>
  %10 = andi %4, %9 : tile<1024xi1>
  %11 = muli %7, %cst_1_i64 : tile<1024xi64>
  %12 = addi %6, %11 : tile<1024xi64>
  %reshape_21 = reshape %assume : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_22 = broadcast %reshape_21 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %13 = offset %bcast_22, %12 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %cst_0_bf16 = constant <bf16: 0.000000e+00> : tile<bf16>
  %reshape_23 = reshape %cst_0_bf16 : tile<bf16> -> tile<1xbf16>
  %bcast_24 = broadcast %reshape_23 : tile<1xbf16> -> tile<1024xbf16>
  %result, %result_token = load_ptr_tko weak %13, %10, %bcast_24 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<bf16>>, tile<1024xi1>, tile<1024xbf16> -> tile<1024xbf16>, token
  %14 = ftof %result  : tile<1024xbf16> -> tile<1024xf32>
  %15 = mulf %14, %14  : tile<1024xf32>
  %reduce = reduce %15 dim=0 identities=[0.000000e+00 : f32] : tile<1024xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %41 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %41 : tile<f32>
  }
  %cst_1000_f32 = constant <f32: 1.000000e+03> : tile<f32>
  %16 = divf %reduce, %cst_1000_f32  : tile<f32>
  %17 = addf %16, %cst_f32  : tile<f32>
  %18 = rsqrt %17 : tile<f32>
  %19 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %20 = exti %assume_assume_14 signed : tile<i32> -> tile<i64>
  %reshape_25 = reshape %20 : tile<i64> -> tile<1xi64>
  %bcast_26 = broadcast %reshape_25 : tile<1xi64> -> tile<1024xi64>
  %21 = cmpi less_than %19, %bcast_26, unsigned : tile<1024xi64> -> tile<1024xi1>
  %22 = muli %19, %cst_1_i64_7 : tile<1024xi64>
  %reshape_27 = reshape %assume_5 : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_28 = broadcast %reshape_27 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %23 = offset %bcast_28, %22 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %cst_0_bf16_29 = constant <bf16: 0.000000e+00> : tile<bf16>
  %reshape_30 = reshape %cst_0_bf16_29 : tile<bf16> -> tile<1xbf16>
  %bcast_31 = broadcast %reshape_30 : tile<1xbf16> -> tile<1024xbf16>
  %result_32, %result_token_33 = load_ptr_tko weak %23, %21, %bcast_31 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<bf16>>, tile<1024xi1>, tile<1024xbf16> -> tile<1024xbf16>, token
  %24 = ftof %result_32  : tile<1024xbf16> -> tile<1024xf32>
  %reshape_34 = reshape %18 : tile<f32> -> tile<1xf32>
  %bcast_35 = broadcast %reshape_34 : tile<1xf32> -> tile<1024xf32>
  %25 = mulf %14, %bcast_35  : tile<1024xf32>
  %26 = mulf %25, %24  : tile<1024xf32>
  %27 = ftof %26  : tile<1024xf32> -> tile<1024xbf16>
  %28 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape_36 = reshape %28 : tile<i64> -> tile<1xi64>
  %bcast_37 = broadcast %reshape_36 : tile<1xi64> -> tile<1024xi64>
  %29 = exti %assume_11 signed : tile<i32> -> tile<i64>
  %reshape_38 = reshape %29 : tile<i64> -> tile<1xi64>
  %bcast_39 = broadcast %reshape_38 : tile<1xi64> -> tile<1024xi64>
  %30 = cmpi less_than %bcast_37, %bcast_39, unsigned : tile<1024xi64> -> tile<1024xi1>
  %31 = exti %assume_assume_13 signed : tile<i32> -> tile<i64>
  %reshape_40 = reshape %31 : tile<i64> -> tile<1xi64>
  %bcast_41 = broadcast %reshape_40 : tile<1xi64> -> tile<1024xi64>
  %32 = muli %bcast_37, %bcast_41 : tile<1024xi64>
  %33 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %34 = exti %assume_assume_12 signed : tile<i32> -> tile<i64>
  %reshape_42 = reshape %34 : tile<i64> -> tile<1xi64>
  %bcast_43 = broadcast %reshape_42 : tile<1xi64> -> tile<1024xi64>
  %35 = cmpi less_than %33, %bcast_43, unsigned : tile<1024xi64> -> tile<1024xi1>
  %36 = andi %30, %35 : tile<1024xi1>
  %37 = muli %33, %cst_1_i64_8 : tile<1024xi64>
  %38 = addi %32, %37 : tile<1024xi64>
  %reshape_44 = reshape %assume_2 : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_45 = broadcast %reshape_44 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %39 = offset %bcast_45, %38 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %40 = store_ptr_tko weak %39, %27, %36 token=%0 optimization_hints = <default = {latency = 1}> : tile<1024xptr<bf16>>, tile<1024xbf16>, tile<1024xi1> -> token
  return
}
