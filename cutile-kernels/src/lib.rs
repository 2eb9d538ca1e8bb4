//! (being written)
pub mod gemm;
pub mod softmax;
pub mod vector_add;
