//! `cutile-kernels`: the catalog of production tile kernels and the list of specializations the workspace
//! compiles ([`catalog`]).

pub mod attention;
pub mod catalog;
pub mod gemm;
pub mod norm;
pub mod softmax;
pub mod vector_add;
