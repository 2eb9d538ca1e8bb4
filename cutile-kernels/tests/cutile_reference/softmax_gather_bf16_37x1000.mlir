entry @softmax_gather_bf16_37x1000(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<bf16>>
  %assume_0 = assume div_by<8>, %arg2 : tile<i32>
  %assume_1 = assume div_by<8>, %arg3 : tile<i32>
  %assume_2 = assume div_by<16>, %arg5 : tile<ptr<bf16>>
  %assume_3 = assume div_by<8>, %arg7 : tile<i32>
  %assume_4 = assume div_by<8>, %arg8 : tile<i32>
  %cst_1_i64 = constant <i64: 1> : tile<1024xi64>
  %cst_1_i64_5 = constant <i64: 1> : tile<1024xi64>
  %assume_6 = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_7 = assume bounded<0, ?>, %assume_1 : tile<i32>
  %assume_8 = assume bounded<0, ?>, %arg6 : tile<i32>
  %assume_assume_9 = assume bounded<0, ?>, %assume_3 : tile<i32>
  %assume_assume_10 = assume bounded<0, ?>, %assume_4 : tile<i32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %1 = iota : tile<1024xi32>
  %2 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape = reshape %2 : tile<i64> -> tile<1xi64>
  %bcast = broadcast %reshape : tile<1xi64> -> tile<1024xi64>
  %3 = exti %assume_8 signed : tile<i32> -> tile<i64>
  %reshape_11 = reshape %3 : tile<i64> -> tile<1xi64>
  %bcast_12 = broadcast %reshape_11 : tile<1xi64> -> tile<1024xi64>
  %4 = cmpi less_than %bcast, %bcast_12, unsigned : tile<1024xi64> -> tile<1024xi1>
  %5 = exti %assume_assume_10 signed : tile<i32> -> tile<i64>
  %reshape_13 = reshape %5 : tile<i64> -> tile<1xi64>
  %bcast_14 = broadcast %reshape_13 : tile<1xi64> -> tile<1024xi64>
  %6 = muli %bcast, %bcast_14 : tile<1024xi64>
  %7 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %8 = exti %assume_assume_9 signed : tile<i32> -> tile<i64>
  %reshape_15 = reshape %8 : tile<i64> -> tile<1xi64>
  %bcast_16 = broadcast %reshape_15 : tile<1xi64> -> tile<1024xi64>
  %9 = cmpi less_than %7, %bcast_16, unsigned : tile<1024xi64> -> tile<1024xi1>
  %10 = andi %4, %9 : tile<1024xi1>
  %11 = muli %7, %cst_1_i64 : tile<1024xi64>
  %12 = addi %6, %11 : tile<1024xi64>
  %reshape_17 = reshape %assume_2 : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_18 = broadcast %reshape_17 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %13 = offset %bcast_18, %12 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %cst_bf16 = constant <bf16: 0xFF80> : tile<bf16>
  %reshape_19 = reshape %cst_bf16 : tile<bf16> -> tile<1xbf16>
  %bcast_20 = broadcast %reshape_19 : tile<1xbf16> -> tile<1024xbf16>
  %result, %result_token = load_ptr_tko weak %13, %10, %bcast_20 token=%0 : tile<1024xptr<bf16>>, tile<1024xi1>, tile<1024xbf16> -> tile<1024xbf16>, token
  %14 = ftof %result  : tile<1024xbf16> -> tile<1024xf32>
  %reduce = reduce %14 dim=0 identities=[0xFF800000 : f32] : tile<1024xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %32 = maxf %reduce_lhs, %reduce_rhs : tile<f32>
    yield %32 : tile<f32>
  }
  %reshape_21 = reshape %reduce : tile<f32> -> tile<1xf32>
  %bcast_22 = broadcast %reshape_21 : tile<1xf32> -> tile<1024xf32>
  %15 = subf %14, %bcast_22  : tile<1024xf32>
  %16 = exp %15 rounding<approx> : tile<1024xf32>
  %reduce_23 = reduce %16 dim=0 identities=[0.000000e+00 : f32] : tile<1024xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %32 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %32 : tile<f32>
  }
  %reshape_24 = reshape %reduce_23 : tile<f32> -> tile<1xf32>
  %bcast_25 = broadcast %reshape_24 : tile<1xf32> -> tile<1024xf32>
  %17 = divf %16, %bcast_25 rounding<approx> flush_to_zero : tile<1024xf32>
  %18 = ftof %17  : tile<1024xf32> -> tile<1024xbf16>
  %19 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape_26 = reshape %19 : tile<i64> -> tile<1xi64>
  %bcast_27 = broadcast %reshape_26 : tile<1xi64> -> tile<1024xi64>
  %20 = exti %assume_6 signed : tile<i32> -> tile<i64>
  %reshape_28 = reshape %20 : tile<i64> -> tile<1xi64>
  %bcast_29 = broadcast %reshape_28 : tile<1xi64> -> tile<1024xi64>
  %21 = cmpi less_than %bcast_27, %bcast_29, unsigned : tile<1024xi64> -> tile<1024xi1>
  %22 = exti %assume_assume_7 signed : tile<i32> -> tile<i64>
  %reshape_30 = reshape %22 : tile<i64> -> tile<1xi64>
  %bcast_31 = broadcast %reshape_30 : tile<1xi64> -> tile<1024xi64>
  %23 = muli %bcast_27, %bcast_31 : tile<1024xi64>
  %24 = exti %1 signed : tile<1024xi32> -> tile<1024xi64>
  %25 = exti %assume_assume signed : tile<i32> -> tile<i64>
  %reshape_32 = reshape %25 : tile<i64> -> tile<1xi64>
  %bcast_33 = broadcast %reshape_32 : tile<1xi64> -> tile<1024xi64>
  %26 = cmpi less_than %24, %bcast_33, unsigned : tile<1024xi64> -> tile<1024xi1>
  %27 = andi %21, %26 : tile<1024xi1>
  %28 = muli %24, %cst_1_i64_5 : tile<1024xi64>
  %29 = addi %23, %28 : tile<1024xi64>
  %reshape_34 = reshape %assume : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_35 = broadcast %reshape_34 : tile<1xptr<bf16>> -> tile<1024xptr<bf16>>
  %30 = offset %bcast_35, %29 : tile<1024xptr<bf16>>, tile<1024xi64> -> tile<1024xptr<bf16>>
  %31 = store_ptr_tko weak %30, %18, %27 token=%0 : tile<1024xptr<bf16>>, tile<1024xbf16>, tile<1024xi1> -> token
  return
}
