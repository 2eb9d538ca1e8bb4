//! `Tensor::narrow`: sub-views at run-time offsets. The IR (an `offset` base, a second `make_tensor_view`
//! with the narrowed extent, view loads and stores through it, no pointer gathers), the base-alignment
//! `assume` it keeps or weakens according to the row stride, the launch signature of a kernel whose output
//! is stored only through a sub-view, the specialization errors, and a tileiras compile.

#![allow(clippy::unwrap_used)]

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::*;

#[cutile::module]
mod kernels {
    use cutile::core::*;

    /// Copies rows `start .. start + len` of `x` to rows `dst .. dst + len` of `y`, tile by tile.
    #[cutile::entry]
    pub fn copy_rows<const BM: i32, const D: i32>(
        x: &Tensor<bf16, S2<DYN, D>>,
        start: Scalar<i32>,
        dst: Scalar<i32>,
        len: Scalar<i32>,
        y: &mut Tensor<bf16, S2<BM, D>>,
    ) {
        let src = x.narrow(0, start, len);
        let mut out = y.narrow(0, dst, len);
        let t = src.load_tile_padded::<S2<BM, D>>((block_id_x(), 0), Padding::Zero);
        // SAFETY: one block per tile of the sub-view.
        unsafe { out.store_at((block_id_x(), 0), t) };
    }

    /// Narrows a statically sized axis of an input: a specialization error.
    #[cutile::entry]
    pub fn narrow_static<const BM: i32>(
        x: &Tensor<f32, S2<DYN, 64>>,
        start: Scalar<i32>,
        y: &mut Tensor<f32, S2<BM, 64>>,
    ) {
        let src = x.narrow(1, start, start);
        y.store(src.load_tile::<S2<BM, 64>>((block_id_x(), 0)));
    }
}

fn copy_rows() -> Kernel {
    kernels::copy_rows::kernel::<64, 128>()
}

fn ir(arrays: &[TensorMeta]) -> String {
    copy_rows().specialize(arrays).unwrap().ir_text()
}

/// The `div_by` divisors assumed of `offset` results (the sub-views' bases), in order; 1 for none.
fn offset_divisors(text: &str) -> Vec<u64> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, l) in lines.iter().enumerate() {
        if !l.contains(" = offset ") {
            continue;
        }
        let name = l.trim().split(' ').next().unwrap();
        let div = lines
            .get(i + 1)
            .filter(|n| n.contains("assume div_by<") && n.contains(&format!(", {name} ")))
            .and_then(|n| n.split("div_by<").nth(1)?.split('>').next()?.parse().ok())
            .unwrap_or(1);
        out.push(div);
    }
    out
}

#[test]
fn narrow_lowers_to_an_offset_view_with_view_loads() {
    let arrays = vec![TensorMeta::contiguous(BF16, &[1000, 128]); 2];
    let s = copy_rows().specialize(&arrays).unwrap();
    cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5).unwrap();
    let text = s.ir_text();
    assert_eq!(text.matches("make_tensor_view").count(), 4, "{text}");
    assert_eq!(text.matches(" = offset ").count(), 2, "{text}");
    assert!(text.contains("load_view_tko"), "{text}");
    assert!(text.contains("store_view_tko"), "{text}");
    assert!(!text.contains("load_ptr_tko"), "{text}");
    assert!(!text.contains("store_ptr_tko"), "{text}");
    // 256 bytes per row keep the 16-byte base alignment.
    assert_eq!(offset_divisors(&text), [16, 16], "{text}");
}

#[test]
fn alignment_follows_the_row_stride() {
    // Rows of 130 elements (260 bytes, divisible by 4): the sub-view's base is 4-byte aligned.
    let x = TensorMeta::contiguous(BF16, &[1000, 128]).with_strides(&[130, 1]);
    let y = TensorMeta::contiguous(BF16, &[1000, 128]);
    let text = ir(&[x, y]);
    assert_eq!(offset_divisors(&text), [4, 16], "{text}");
    // A base aligned to 8 bytes limits every sub-view to 8 even with aligned rows.
    let x = TensorMeta::contiguous(BF16, &[1000, 128]).with_base_align(8);
    let y = TensorMeta::contiguous(BF16, &[1000, 128]);
    let text = ir(&[x, y]);
    assert_eq!(offset_divisors(&text), [8, 16], "{text}");
    // Odd rows (129 bf16): only the element's 2 bytes.
    let x = TensorMeta::contiguous(BF16, &[1000, 128]).with_strides(&[129, 1]);
    let text = ir(&[x, TensorMeta::contiguous(BF16, &[1000, 128])]);
    assert_eq!(offset_divisors(&text), [2, 16], "{text}");
}

#[test]
fn the_launch_signature_reads_entry_views_only() {
    let k = copy_rows();
    let arrays = vec![TensorMeta::contiguous(BF16, &[1000, 128]); 2];
    let s = k.specialize(&arrays).unwrap();
    let sig = cutile::launch::Signature::from_specialized(&k, &s, &[2, 2]).unwrap();
    // The output is stored only through its sub-view: no grid can be derived from it.
    assert_eq!(sig.grid_param, None);
}

#[test]
fn narrowing_a_static_input_axis_is_an_error() {
    let arrays = vec![TensorMeta::contiguous(F32, &[100, 64]); 2];
    let e = kernels::narrow_static::kernel::<64>()
        .specialize(&arrays)
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be declared DYN"), "{e}");
}

#[test]
fn narrowed_views_compile() {
    let tileiras = match cutile::toolchain::Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip(
                "narrowed_views_compile",
                &format!("tileiras not found ({e})"),
            );
            return;
        }
    };
    let arrays = vec![TensorMeta::contiguous(BF16, &[1000, 128]); 2];
    let s = copy_rows().specialize(&arrays).unwrap();
    for arch in [
        cutile::toolchain::GpuArch::Sm80,
        cutile::toolchain::GpuArch::Sm90,
    ] {
        let req = cutile::toolchain::CompileRequest::new(arch);
        s.compile(&tileiras, &req)
            .unwrap_or_else(|e| panic!("{arch:?}: {e}\n{}", s.ir_text()));
    }
}
