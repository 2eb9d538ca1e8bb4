//! Memory: tensor and tile views (construction, shape queries), loads and stores through views and
//! pointers, atomics, memory ordering/scope combinations, pointer offsets, globals and alloca.

use super::*;

/// Rules of the memory ops.
pub(super) fn check(c: &Ck<'_>) -> R {
    let (op, env) = (c.op, c.env);
    use Opcode::*;
    match op.opcode {
        Offset => {
            let (p, off, r) = (c.one("ptr")?, c.one("offset")?, c.res(0)?);
            if pointer_tile(p).is_none() {
                return Err(format!("ptr must be a pointer tile, got {}", tt(p)));
            }
            c.int_tile(off, "offset")?;
            c.same_shape(p, off, "pointer and offset")?;
            c.same(p, r, "pointer and result types")
        }
        MakeTensorView => check_make_tensor_view(c),
        MakePartitionView | MakeStridedView | MakeGatherScatterView => {
            let (tv, r) = (c.one("tensor_view")?, c.res(0)?);
            let inner = match (op.opcode, r) {
                (MakePartitionView, Type::PartitionView { tensor_view, .. })
                | (MakeStridedView, Type::StridedView { tensor_view, .. })
                | (MakeGatherScatterView, Type::GatherScatterView { tensor_view, .. }) => {
                    tensor_view
                }
                _ => {
                    return Err(format!(
                        "result must be a {} type, got {}",
                        &op.opcode.mnemonic()["make_".len()..],
                        tt(r)
                    ));
                }
            };
            if **inner != *tv {
                return Err(format!(
                    "operand type {} differs from the view's tensor_view {}",
                    tt(tv),
                    tt(inner)
                ));
            }
            Ok(())
        }
        GetIndexSpaceShape | GetTensorShape => {
            let src = c.one("src")?;
            let rank = if op.opcode == GetTensorShape {
                match src {
                    Type::TensorView { shape, .. } => shape.len(),
                    _ => return Err(format!("src must be a tensor_view, got {}", tt(src))),
                }
            } else {
                view_info(src)
                    .ok_or_else(|| format!("src must be a view, got {}", tt(src)))?
                    .tile_shape
                    .len()
            };
            let rs = c.results()?;
            if rs.len() != rank {
                return Err(format!("expected {rank} results, got {}", rs.len()));
            }
            if let Some(t) = rs.iter().find(|t| !is_int_scalar(t)) {
                return Err(format!(
                    "results must be rank-0 integer tiles, got {}",
                    tt(t)
                ));
            }
            if rs.windows(2).any(|w| w[0] != w[1]) {
                return Err(format!(
                    "results must share one type, got {}",
                    types_text(&rs.iter().map(|t| (*t).clone()).collect::<Vec<_>>())
                ));
            }
            Ok(())
        }
        LoadViewTko
        | StoreViewTko
        | AtomicRedViewTko
        | MultimemLoadReduceViewTko
        | MultimemReduceViewTko
        | MultimemStoreViewTko => check_view_access(c),
        LoadPtrTko | StorePtrTko => check_ptr_access(c),
        AtomicRMWTko | AtomicCASTko => check_atomic(c),
        GetGlobal => {
            let name = c.str_attr("name").unwrap_or("");
            let g = env
                .module
                .globals
                .iter()
                .find(|g| g.name == name)
                .ok_or_else(|| format!("no global named @{name} in the module"))?;
            let r = c.res(0)?;
            let (pointee, sh) = pointer_tile(r)
                .filter(|(_, sh)| sh.is_empty())
                .ok_or_else(|| format!("result must be a rank-0 pointer tile, got {}", tt(r)))?;
            let _ = sh;
            let gelem = g.ty.elem().cloned().unwrap_or_else(|| g.ty.clone());
            if *pointee != gelem {
                return Err(format!(
                    "result {} does not point to the element type {} of @{name}",
                    tt(r),
                    tt(&gelem)
                ));
            }
            Ok(())
        }
        Global => Err(
            "globals belong in Module::globals (the Global section), not in a function body".into(),
        ),
        Alloca => {
            let r = c.res(0)?;
            let (pointee, _) = pointer_tile(r)
                .filter(|(_, sh)| sh.is_empty())
                .ok_or_else(|| format!("result must be a rank-0 pointer tile, got {}", tt(r)))?;
            let align = c.int_attr("alignment").unwrap_or(0);
            if align == 0 || !align.is_power_of_two() {
                return Err(format!("alignment {align} must be a power of two"));
            }
            if let Type::Scalar(s) = pointee
                && align < s.storage_bytes() as u64
            {
                return Err(format!("alignment {align} is below the size of {s}"));
            }
            Ok(())
        }
        // `check_op` only sends this family its own opcodes.
        other => Err(format!(
            "internal error: {} was dispatched to the memory rules",
            other.mnemonic()
        )),
    }
}

fn check_make_tensor_view(c: &Ck<'_>) -> R {
    let (base, r) = (c.one("base")?, c.res(0)?);
    let (pointee, bsh) = pointer_tile(base)
        .ok_or_else(|| format!("base must be a rank-0 pointer tile, got {}", tt(base)))?;
    if !bsh.is_empty() {
        return Err(format!(
            "base must be a rank-0 pointer tile, got {}",
            tt(base)
        ));
    }
    let Type::TensorView {
        elem,
        shape,
        strides,
        ..
    } = r
    else {
        return Err(format!("result must be a tensor_view, got {}", tt(r)));
    };
    if **elem != *pointee {
        return Err(format!(
            "base points to {} but the tensor_view holds {}",
            tt(pointee),
            tt(elem)
        ));
    }
    let (pa, ta) = (
        pointer_attr(base),
        match r {
            Type::TensorView { attr, .. } => *attr,
            _ => None,
        },
    );
    if pa != ta {
        let name =
            |a: Option<u8>| a.map_or("absent", |a| PtrAttr::from_u8(a).map_or("?", PtrAttr::name));
        return Err(format!(
            "the tensor_view must carry the base pointer's ptr_attr ({}), got {}",
            name(pa),
            name(ta)
        ));
    }
    let dyn_shape = c.group("dynamicShape")?;
    let dyn_strides = c.group("dynamicStrides")?;
    let want_shape = shape.iter().filter(|&&d| d == DYNAMIC).count();
    let want_strides = strides.iter().filter(|&&d| d == DYNAMIC).count();
    if dyn_shape.len() != want_shape {
        return Err(format!(
            "{} has {want_shape} dynamic extent(s) but {} shape operand(s) were given",
            tt(r),
            dyn_shape.len()
        ));
    }
    if dyn_strides.len() != want_strides {
        return Err(format!(
            "{} has {want_strides} dynamic stride(s) but {} stride operand(s) were given",
            tt(r),
            dyn_strides.len()
        ));
    }
    let all: Vec<&Type> = dyn_shape.iter().chain(&dyn_strides).copied().collect();
    if let Some(t) = all.iter().find(|t| !is_int_scalar(t)) {
        return Err(format!(
            "dynamic extents and strides must be rank-0 integer tiles, got {}",
            tt(t)
        ));
    }
    if all.windows(2).any(|w| w[0] != w[1]) {
        return Err("dynamic extents and strides must all have the same type".into());
    }
    Ok(())
}

/// Index operands of a view access: one per view dimension, rank-0 integer tiles of one type (the sparse
/// dimension of a gather/scatter view takes a 1-d tile of the tile extent).
fn check_view_indices(c: &Ck<'_>, vi: &ViewInfo<'_>) -> R {
    let idx = c.group("index")?;
    let rank = vi.tile_shape.len();
    if idx.len() != rank {
        return Err(format!(
            "{} has {rank} dimension(s) but {} index operand(s) were given",
            vi.kind,
            idx.len()
        ));
    }
    let mut base: Option<&Type> = None;
    for (i, t) in idx.iter().enumerate() {
        if Some(i) == vi.sparse_dim {
            match scalar_tile(t) {
                Some((s, sh)) if is_int(s) && sh.len() == 1 && sh[0] == vi.tile_shape[i] => {
                    continue;
                }
                _ => {
                    return Err(format!(
                        "index {i} (the sparse dimension) must be a 1-d integer tile of {} elements, got {}",
                        vi.tile_shape[i],
                        tt(t)
                    ));
                }
            }
        }
        if !is_int_scalar(t) {
            return Err(format!(
                "index {i} must be a rank-0 integer tile, got {}",
                tt(t)
            ));
        }
        match base {
            Some(b) if b != *t => {
                return Err(format!(
                    "index {i} has type {} but earlier indices have {}",
                    tt(t),
                    tt(b)
                ));
            }
            _ => base = Some(t),
        }
    }
    if let Some(OpAttr::BoolArray(b)) = c.op.attr("inbounds")
        && b.len() != rank
    {
        return Err(format!(
            "inbounds has {} entries for {rank} indices",
            b.len()
        ));
    }
    Ok(())
}

fn check_ordering(c: &Ck<'_>, load: bool) -> R {
    use MemoryOrdering::*;
    let ord = c
        .enum_::<MemoryOrdering>("memory_ordering_semantics")
        .unwrap_or(Weak);
    let scope = c.enum_::<MemoryScope>("memory_scope");
    let ok = if load {
        [Weak, Relaxed, Acquire]
    } else {
        [Weak, Relaxed, Release]
    };
    if !ok.contains(&ord) {
        return Err(format!(
            "memory ordering {} is not allowed for a {}; use {}, {} or {}",
            ord.name(),
            if load { "load" } else { "store" },
            ok[0].name(),
            ok[1].name(),
            ok[2].name()
        ));
    }
    if ord == Weak && scope.is_some() {
        return Err("a weak access must not have a memory scope".into());
    }
    if ord != Weak && scope.is_none() {
        return Err(format!("a {} access needs a memory scope", ord.name()));
    }
    Ok(())
}

fn check_access_hints(c: &Ck<'_>, view: bool) -> R {
    if !c.env.strict_hints {
        return Ok(());
    }
    if let Some(OpAttr::Hints(h)) = c.op.attr("optimization_hints") {
        let keys: &[&str] = if view {
            &["latency", "allow_tma"]
        } else {
            &["latency"]
        };
        check_hints(h, keys, None)?;
    }
    Ok(())
}

fn check_view_access(c: &Ck<'_>) -> R {
    use Opcode::*;
    let op = c.op.opcode;
    let view = c.one("view")?;
    let vi =
        view_info(view).ok_or_else(|| format!("view must be a tile view, got {}", tt(view)))?;
    check_view_indices(c, &vi)?;
    c.token_operand("token")?;
    let want = vi.tile_type();
    match op {
        LoadViewTko | MultimemLoadReduceViewTko => {
            let r = c.res(0)?;
            if *r != want {
                return Err(format!(
                    "the result tile must be {} (the view's tile), got {}",
                    tt(&want),
                    tt(r)
                ));
            }
            c.token_result(1)?;
        }
        _ => {
            let tile = c.one(if op == AtomicRedViewTko {
                "value"
            } else {
                "tile"
            })?;
            if *tile != want {
                return Err(format!(
                    "the stored tile must be {} (the view's tile), got {}",
                    tt(&want),
                    tt(tile)
                ));
            }
            c.token_result(0)?;
        }
    }
    let multimem = matches!(
        op,
        MultimemLoadReduceViewTko | MultimemReduceViewTko | MultimemStoreViewTko
    );
    if multimem && !is_multicast(vi.ptr_attr) {
        return Err(format!(
            "needs a view over a multicast pointer (tile<ptr<T, <multicast>>>, ptr_attr 2), got {}",
            tt(view)
        ));
    }
    if !multimem && is_multicast(vi.ptr_attr) && op == AtomicRedViewTko {
        return Err(
            "multicast pointers are not supported for atomics; use multimem_reduce_view_tko".into(),
        );
    }
    match op {
        LoadViewTko => {
            check_ordering(c, true)?;
            check_access_hints(c, true)
        }
        StoreViewTko => {
            check_ordering(c, false)?;
            check_access_hints(c, true)
        }
        AtomicRedViewTko => {
            if vi.sparse_dim.is_some() {
                return Err("gather_scatter_view is not supported; use a partition_view".into());
            }
            if c.enum_("memory_ordering_semantics") != Some(MemoryOrdering::Relaxed) {
                return Err("only relaxed memory ordering is supported".into());
            }
            if c.enum_("memory_scope") == Some(MemoryScope::Sys) {
                return Err("memory scope sys is not supported; use tl_blk or device".into());
            }
            let mode = c.enum_("mode").unwrap_or(AtomicRmwMode::And);
            if mode == AtomicRmwMode::Xchg {
                return Err("mode xchg is not supported".into());
            }
            check_rmw_mode(mode, vi.elem)
        }
        _ => Ok(()),
    }
}

fn check_ptr_access(c: &Ck<'_>) -> R {
    let load = c.op.opcode == Opcode::LoadPtrTko;
    let ptrs = c.one(if load { "source" } else { "destination" })?;
    let (pointee, psh) = pointer_tile(ptrs)
        .ok_or_else(|| format!("pointers must be a pointer tile, got {}", tt(ptrs)))?;
    let val = if load { c.res(0)? } else { c.one("value")? };
    let (ve, vsh) = tile_parts(val)?;
    if ve != pointee || vsh != psh {
        return Err(format!(
            "value {} does not match pointers {} (same shape, element = pointee)",
            tt(val),
            tt(ptrs)
        ));
    }
    if let Some(m) = c.opt("mask")?
        && !matches!(scalar_tile(m), Some((ScalarType::I1, sh)) if sh == psh)
    {
        return Err(format!(
            "mask must be an i1 tile of shape {psh:?}, got {}",
            tt(m)
        ));
    }
    if load {
        if let Some(p) = c.opt("paddingValue")? {
            c.same(p, val, "padding and result types")?;
        }
        c.token_result(1)?;
    } else {
        c.token_result(0)?;
    }
    c.token_operand("token")?;
    check_ordering(c, load)?;
    check_access_hints(c, false)
}

fn check_rmw_mode(mode: AtomicRmwMode, elem: &Type) -> R {
    let s = match elem {
        Type::Scalar(s) => *s,
        other => return Err(format!("atomics need a scalar element, got {}", tt(other))),
    };
    match mode {
        AtomicRmwMode::AddF => {
            if !is_base_float(s) {
                return Err(format!(
                    "mode addf works only with f16, bf16, f32 and f64, got {s}"
                ));
            }
        }
        AtomicRmwMode::Xchg => {
            if s.bit_width() != 32 && s.bit_width() != 64 {
                return Err(format!(
                    "mode xchg works only with 32- or 64-bit types, got {s}"
                ));
            }
        }
        _ => {
            if !matches!(s, ScalarType::I32 | ScalarType::I64) {
                return Err(format!(
                    "mode {} works only with i32 and i64, got {s}",
                    mode.name()
                ));
            }
        }
    }
    Ok(())
}

fn check_atomic(c: &Ck<'_>) -> R {
    let cas = c.op.opcode == Opcode::AtomicCASTko;
    let ptrs = c.one("pointers")?;
    let (pointee, psh) = pointer_tile(ptrs)
        .ok_or_else(|| format!("pointers must be a pointer tile, got {}", tt(ptrs)))?;
    if is_multicast(pointer_attr(ptrs)) {
        return Err("multicast pointers are not supported for atomics".into());
    }
    let val = c.one(if cas { "val" } else { "arg" })?;
    let (ve, vsh) = tile_parts(val)?;
    if ve != pointee || vsh != psh {
        return Err(format!(
            "value {} does not match pointers {} (same shape, element = pointee)",
            tt(val),
            tt(ptrs)
        ));
    }
    c.same(val, c.res(0)?, "value and result types")?;
    if cas {
        c.same(c.one("cmp")?, val, "cmp and val types")?;
        let w = match ve {
            Type::Scalar(s) => s.bit_width(),
            _ => 0,
        };
        if w != 32 && w != 64 {
            return Err(format!(
                "compare-and-swap works only on 32- or 64-bit values, got {}",
                tt(val)
            ));
        }
    } else {
        check_rmw_mode(c.enum_("mode").unwrap_or(AtomicRmwMode::And), ve)?;
    }
    if let Some(m) = c.opt("mask")?
        && !matches!(scalar_tile(m), Some((ScalarType::I1, sh)) if sh == psh)
    {
        return Err(format!(
            "mask must be an i1 tile of shape {psh:?}, got {}",
            tt(m)
        ));
    }
    c.token_operand("token")?;
    c.token_result(1)?;
    let ord = c
        .enum_("memory_ordering_semantics")
        .unwrap_or(MemoryOrdering::Weak);
    if ord == MemoryOrdering::Weak {
        return Err("atomics need relaxed, acquire, release or acq_rel ordering, not weak".into());
    }
    Ok(())
}

/// Whether a pointer attribute byte is `multicast` (what the multimem ops need and atomics refuse).
fn is_multicast(attr: Option<u8>) -> bool {
    attr.and_then(PtrAttr::from_u8) == Some(PtrAttr::Multicast)
}
