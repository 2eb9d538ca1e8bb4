entry @e4(%arg0: tile<i32>, %arg1: tile<i1>) {
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_2_f32 = constant <f32: 2.000000e+00> : tile<4xf32>
  %0:2 = if %arg1 -> (tile<4xf32>, tile<i32>) {
    yield %cst_2_f32, %cst_0_i32 : tile<4xf32>, tile<i32>
  } else {
    %4 = negf %cst_2_f32 : tile<4xf32>
    yield %4, %cst_1_i32 : tile<4xf32>, tile<i32>
  }
  if %arg1 {
    %4 = negf %cst_2_f32 : tile<4xf32>
  } else {
  }
  if %arg1 {
  } else {
  }
  for unsigned %loopIdx in (%cst_0_i32 to %arg0, step %cst_1_i32) : tile<i32> {
  }
  %for:2 = for %loopIdx in (%cst_0_i32 to %arg0, step %cst_1_i32) : tile<i32> iter_values(%iterArg0 = %cst_2_f32, %iterArg1 = %cst_0_i32) -> (tile<4xf32>, tile<i32>) {
    %4 = addf %iterArg0, %iterArg0  : tile<4xf32>
    continue %4, %loopIdx : tile<4xf32>, tile<i32>
  }
  %1 = loop iter_values(%arg2 = %cst_0_i32) : tile<i32> -> tile<i32> {
    %4 = cmpi greater_than %arg2, %arg0, signed : tile<i32> -> tile<i1>
    if %4 {
      break %arg2 : tile<i32>
    } else {
    }
    %5 = addi %arg2, %cst_1_i32 : tile<i32>
    continue %5 : tile<i32>
  }
  loop {
    break
  }
  %2 = loop : tile<i32> {
    break %cst_0_i32 : tile<i32>
  }
  %cst_3_i32 = constant <i32: 3> : tile<4xi32>
  %reduce:2 = reduce %cst_2_f32, %cst_3_i32 dim=0 identities=[5.000000e-01 : f32, -1 : i32] : tile<4xf32>, tile<4xi32> -> tile<f32>, tile<i32> 
  (%reduce_lhs0: tile<f32>, %reduce_rhs0: tile<f32>, %reduce_lhs1: tile<i32>, %reduce_rhs1: tile<i32>) {
    %4 = addf %reduce_lhs0, %reduce_rhs0  : tile<f32>
    %5 = maxi %reduce_lhs1, %reduce_rhs1 signed : tile<i32>
    yield %4, %5 : tile<f32>, tile<i32>
  }
  %3 = scan %cst_2_f32 dim=0 reverse=true identities=[1.000000e+00 : f32] : tile<4xf32> -> tile<4xf32> 
  (%arg2: tile<f32>, %arg3: tile<f32>) {
    %4 = mulf %arg2, %arg3  : tile<f32>
    yield %4 : tile<f32>
  }
  return
}
