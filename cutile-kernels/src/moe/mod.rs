//! NVFP4 mixture-of-experts (issue 12).
//!
//! - [`reference`](mod@reference): the CPU references (format, routing, alignment, expert computation).
pub mod reference;
