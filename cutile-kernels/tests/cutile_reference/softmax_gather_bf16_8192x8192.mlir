entry @softmax_gather_bf16_8192x8192(%arg0: tile<ptr<bf16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<ptr<bf16>>, %arg6: tile<i32>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<i32>) optimization_hints=<default = {}> {
  %0 = make_token : token
  %assume = assume div_by<16>, %arg0 : tile<ptr<bf16>>
  %assume_0 = assume div_by<16>, %arg3 : tile<i32>
  %assume_1 = assume div_by<16>, %arg5 : tile<ptr<bf16>>
  %assume_2 = assume div_by<16>, %arg8 : tile<i32>
  %cst_1_i64 = constant <i64: 1> : tile<8192xi64>
  %cst_1_i64_3 = constant <i64: 1> : tile<8192xi64>
  %assume_assume = assume bounded<0, ?>, %assume_0 : tile<i32>
  %assume_assume_4 = assume bounded<0, ?>, %assume_2 : tile<i32>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %1 = iota : tile<8192xi32>
  %2 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape = reshape %2 : tile<i64> -> tile<1xi64>
  %bcast = broadcast %reshape : tile<1xi64> -> tile<8192xi64>
  %3 = exti %assume_assume_4 signed : tile<i32> -> tile<i64>
  %reshape_5 = reshape %3 : tile<i64> -> tile<1xi64>
  %bcast_6 = broadcast %reshape_5 : tile<1xi64> -> tile<8192xi64>
  %4 = muli %bcast, %bcast_6 : tile<8192xi64>
  %5 = exti %1 signed : tile<8192xi32> -> tile<8192xi64>
  %6 = muli %5, %cst_1_i64 : tile<8192xi64>
  %7 = addi %4, %6 : tile<8192xi64>
  %reshape_7 = reshape %assume_1 : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_8 = broadcast %reshape_7 : tile<1xptr<bf16>> -> tile<8192xptr<bf16>>
  %8 = offset %bcast_8, %7 : tile<8192xptr<bf16>>, tile<8192xi64> -> tile<8192xptr<bf16>>
  %cst_bf16 = constant <bf16: 0xFF80> : tile<bf16>
  %reshape_9 = reshape %cst_bf16 : tile<bf16> -> tile<1xbf16>
  %bcast_10 = broadcast %reshape_9 : tile<1xbf16> -> tile<8192xbf16>
  %result, %result_token = load_ptr_tko weak %8, %bcast_10 token=%0 : tile<8192xptr<bf16>>, tile<8192xbf16> -> tile<8192xbf16>, token
  %9 = ftof %result  : tile<8192xbf16> -> tile<8192xf32>
  %reduce = reduce %9 dim=0 identities=[0xFF800000 : f32] : tile<8192xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %22 = maxf %reduce_lhs, %reduce_rhs : tile<f32>
    yield %22 : tile<f32>
  }
  %reshape_11 = reshape %reduce : tile<f32> -> tile<1xf32>
  %bcast_12 = broadcast %reshape_11 : tile<1xf32> -> tile<8192xf32>
  %10 = subf %9, %bcast_12  : tile<8192xf32>
  %11 = exp %10 rounding<approx> : tile<8192xf32>
  %reduce_13 = reduce %11 dim=0 identities=[0.000000e+00 : f32] : tile<8192xf32> -> tile<f32> 
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %22 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %22 : tile<f32>
  }
  %reshape_14 = reshape %reduce_13 : tile<f32> -> tile<1xf32>
  %bcast_15 = broadcast %reshape_14 : tile<1xf32> -> tile<8192xf32>
  %12 = divf %11, %bcast_15 rounding<approx> flush_to_zero : tile<8192xf32>
  %13 = ftof %12  : tile<8192xf32> -> tile<8192xbf16>
  %14 = exti %blockId_x signed : tile<i32> -> tile<i64>
  %reshape_16 = reshape %14 : tile<i64> -> tile<1xi64>
  %bcast_17 = broadcast %reshape_16 : tile<1xi64> -> tile<8192xi64>
  %15 = exti %assume_assume signed : tile<i32> -> tile<i64>
  %reshape_18 = reshape %15 : tile<i64> -> tile<1xi64>
  %bcast_19 = broadcast %reshape_18 : tile<1xi64> -> tile<8192xi64>
  %16 = muli %bcast_17, %bcast_19 : tile<8192xi64>
  %17 = exti %1 signed : tile<8192xi32> -> tile<8192xi64>
  %18 = muli %17, %cst_1_i64_3 : tile<8192xi64>
  %19 = addi %16, %18 : tile<8192xi64>
  %reshape_20 = reshape %assume : tile<ptr<bf16>> -> tile<1xptr<bf16>>
  %bcast_21 = broadcast %reshape_20 : tile<1xptr<bf16>> -> tile<8192xptr<bf16>>
  %20 = offset %bcast_21, %19 : tile<8192xptr<bf16>>, tile<8192xi64> -> tile<8192xptr<bf16>>
  %21 = store_ptr_tko weak %20, %13 token=%0 : tile<8192xptr<bf16>>, tile<8192xbf16> -> token
  return
}
