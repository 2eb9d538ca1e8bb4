//! Kernel launches as data: which kernel, its parameters (tensors with shape, element type and initial
//! data; scalars), the grid rule, the CPU reference of its output and its throughput metric. The example
//! programs, the GPU harness's runs and its AOT plan all draw from these constructors, so the launches
//! planned ahead of time are exactly the ones made.

use cutile::dsl::Kernel;
use cutile::runtime::Grid;
use cutile_kernels::{attention, gemm, norm, softmax, vector_add};
use half::{bf16, f16};

use crate::data::Dt;

/// Initial contents of a tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Seeded uniform values in `[low, high)`.
    Uniform {
        low: f64,
        high: f64,
        seed: u64,
    },
    Zeros,
}

/// A tensor parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    pub dt: Dt,
    pub shape: Vec<i64>,
    pub init: Init,
}

/// One kernel parameter, in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    In(TensorSpec),
    Out(TensorSpec),
    Scalar(f32),
}

/// How the launch grid is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridRule {
    /// The launcher's default: tiles of the first output.
    Derived,
    Fixed(Grid),
    /// One block per SM along x (persistent kernels).
    PerSm,
}

/// What the reference produced: the expected output, for all rows or for the listed rows of the output
/// viewed as `rows x last-extent`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub values: Vec<f32>,
    pub rows: Option<Vec<usize>>,
}

/// The CPU reference: inputs as the device holds them (rounded to their types), in parameter order,
/// and the scalars → the expected output.
pub type Reference = Box<dyn Fn(&[Vec<f32>], &[f32]) -> Expected + Send + Sync>;

/// Throughput measure of a launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Bytes moved (read + written) → GB/s.
    Bytes(f64),
    /// Floating-point operations → TFLOP/s.
    Flops(f64),
}

/// One launch of one kernel.
pub struct Workload {
    /// Short unique name, e.g. `softmax bf16 1000x1023`.
    pub name: String,
    pub kernel: Kernel,
    pub params: Vec<Param>,
    pub grid: GridRule,
    pub reference: Option<Reference>,
    pub metric: Metric,
    /// Memory-bound: flush L2 before each timed launch.
    pub flush_l2: bool,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("name", &self.name)
            .field("kernel", &self.kernel)
            .field("params", &self.params)
            .field("grid", &self.grid)
            .finish_non_exhaustive()
    }
}

impl Workload {
    /// The element type of the (first) output: its tolerance applies.
    pub fn out_dt(&self) -> Dt {
        self.params
            .iter()
            .find_map(|p| match p {
                Param::Out(t) => Some(t.dt),
                _ => None,
            })
            .unwrap_or(Dt::F32)
    }

    pub fn tolerance(&self) -> f64 {
        self.out_dt().tolerance()
    }
}

fn uni(dt: Dt, shape: &[i64], seed: u64) -> TensorSpec {
    TensorSpec {
        dt,
        shape: shape.to_vec(),
        init: Init::Uniform {
            low: -1.0,
            high: 1.0,
            seed,
        },
    }
}

fn zeros(dt: Dt, shape: &[i64]) -> TensorSpec {
    TensorSpec {
        dt,
        shape: shape.to_vec(),
        init: Init::Zeros,
    }
}

fn all(values: Vec<f32>) -> Expected {
    Expected { values, rows: None }
}

/// `c = a + b` over `n` elements (tile 1024).
pub fn vadd(dt: Dt, n: i64) -> Workload {
    let kernel = match dt {
        Dt::F32 => vector_add::kernels::vadd::kernel::<f32, 1024>(),
        Dt::BF16 => vector_add::kernels::vadd::kernel::<bf16, 1024>(),
        Dt::F16 => vector_add::kernels::vadd::kernel::<f16, 1024>(),
    };
    Workload {
        name: format!("vadd {} {n}", dt.name()),
        kernel,
        params: vec![
            Param::In(uni(dt, &[n], 1)),
            Param::In(uni(dt, &[n], 2)),
            Param::Out(zeros(dt, &[n])),
        ],
        grid: GridRule::Derived,
        reference: Some(Box::new(|i, _| {
            all(vector_add::vadd_reference(&i[0], &i[1]))
        })),
        metric: Metric::Bytes((3 * n as u64 * dt.bytes()) as f64),
        flush_l2: true,
    }
}

/// `y = alpha * x + y` over `n` f32 elements.
pub fn saxpy(n: i64) -> Workload {
    Workload {
        name: format!("saxpy f32 {n}"),
        kernel: vector_add::kernels::saxpy::kernel::<f32, 1024>(),
        params: vec![
            Param::Scalar(1.5),
            Param::In(uni(Dt::F32, &[n], 3)),
            Param::Out(uni(Dt::F32, &[n], 4)),
        ],
        grid: GridRule::Derived,
        reference: Some(Box::new(|i, s| {
            all(vector_add::saxpy_reference(s[0], &i[0], &i[1]))
        })),
        metric: Metric::Bytes((3 * n * 4) as f64),
        flush_l2: true,
    }
}

/// The tile width for a row of `cols` elements: the next power of two, at least 128.
pub fn row_tile(cols: i64) -> i64 {
    (cols.max(128) as u64).next_power_of_two() as i64
}

/// `$k::kernel::<E, BN>()` for a run-time element type (f32 or bf16) and power-of-two tile (128–8192).
macro_rules! pow2_kernel {
    ($dt:expr, $bn:expr, $($k:ident)::+) => {
        match $dt {
            Dt::F32 => pow2_kernel!(@tile f32, $bn, $($k)::+),
            Dt::BF16 => pow2_kernel!(@tile bf16, $bn, $($k)::+),
            Dt::F16 => None,
        }
    };
    (@tile $e:ty, $bn:expr, $($k:ident)::+) => {
        match $bn {
            128 => Some($($k)::+::kernel::<$e, 128>()),
            256 => Some($($k)::+::kernel::<$e, 256>()),
            512 => Some($($k)::+::kernel::<$e, 512>()),
            1024 => Some($($k)::+::kernel::<$e, 1024>()),
            2048 => Some($($k)::+::kernel::<$e, 2048>()),
            4096 => Some($($k)::+::kernel::<$e, 4096>()),
            8192 => Some($($k)::+::kernel::<$e, 8192>()),
            _ => None,
        }
    };
}

/// A row-softmax kernel form (`cutile_kernels::softmax`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoftmaxForm {
    /// `row_softmax`: one row per block, the whole row in one `1 x row_tile(cols)` tile.
    Plain,
    /// `row_softmax_w8`: as `Plain` with 8 worker warps.
    Warps8,
    /// `row_softmax_w16`: as `Plain` with 16 worker warps.
    Warps16,
    /// `row_softmax_online`: the row in chunks of up to 2048, explicit grid `(rows, 1, 1)`.
    Online,
    /// `row_softmax_rows`: `TM` rows per block, `TM x row_tile(cols)` tile with `TM · row_tile ≤ 4096`.
    Rows,
}

impl SoftmaxForm {
    /// The forms other than `Plain`, benchmarked beside it.
    pub const VARIANTS: [SoftmaxForm; 4] = [
        SoftmaxForm::Warps8,
        SoftmaxForm::Warps16,
        SoftmaxForm::Online,
        SoftmaxForm::Rows,
    ];

    /// The workload name's kernel part.
    pub fn name(self) -> &'static str {
        match self {
            SoftmaxForm::Plain => "softmax",
            SoftmaxForm::Warps8 => "softmax_w8",
            SoftmaxForm::Warps16 => "softmax_w16",
            SoftmaxForm::Online => "softmax_online",
            SoftmaxForm::Rows => "softmax_rows",
        }
    }
}

/// Widest chunk of the online form (2048 was the best chunk of the looped norms on an H200).
const SOFTMAX_CHUNK: i64 = 2048;

/// `row_softmax_rows::kernel::<E, TM, BN>()` for the rows-per-block `TM` that keeps `TM x BN` at 4096
/// elements or fewer (at most 4 rows).
macro_rules! rows_kernel {
    ($dt:expr, $bn:expr) => {
        match $dt {
            Dt::F32 => rows_kernel!(@tile f32, $bn),
            Dt::BF16 => rows_kernel!(@tile bf16, $bn),
            Dt::F16 => None,
        }
    };
    (@tile $e:ty, $bn:expr) => {{
        use softmax::kernels::row_softmax_rows as k;
        match $bn {
            128 => Some((4, k::kernel::<$e, 4, 128>())),
            256 => Some((4, k::kernel::<$e, 4, 256>())),
            512 => Some((4, k::kernel::<$e, 4, 512>())),
            1024 => Some((4, k::kernel::<$e, 4, 1024>())),
            2048 => Some((2, k::kernel::<$e, 2, 2048>())),
            4096 => Some((1, k::kernel::<$e, 1, 4096>())),
            8192 => Some((1, k::kernel::<$e, 1, 8192>())),
            _ => None,
        }
    }};
}

/// Row softmax of a `rows x cols` matrix with `row_softmax` (one row per block, tile
/// `1 x row_tile(cols)`), or `None` for rows wider than 8192.
pub fn softmax(dt: Dt, rows: i64, cols: i64) -> Option<Workload> {
    softmax_form(SoftmaxForm::Plain, dt, rows, cols)
}

/// Row softmax of a `rows x cols` matrix with the kernel `form`, or `None` for rows wider than 8192
/// (whole-row forms) or an element type the kernels are not instantiated for.
pub fn softmax_form(form: SoftmaxForm, dt: Dt, rows: i64, cols: i64) -> Option<Workload> {
    use softmax::kernels as s;
    let bn = row_tile(cols);
    let mut grid = GridRule::Derived;
    let kernel = match form {
        SoftmaxForm::Plain => pow2_kernel!(dt, bn, s::row_softmax)?,
        SoftmaxForm::Warps8 => pow2_kernel!(dt, bn, s::row_softmax_w8)?,
        SoftmaxForm::Warps16 => pow2_kernel!(dt, bn, s::row_softmax_w16)?,
        SoftmaxForm::Online => {
            // The kernel's grid is one block per row, not the tiles of its output.
            grid = GridRule::Fixed((u32::try_from(rows).ok()?, 1, 1));
            pow2_kernel!(dt, bn.min(SOFTMAX_CHUNK), s::row_softmax_online)?
        }
        SoftmaxForm::Rows => rows_kernel!(dt, bn)?.1,
    };
    let c = cols as usize;
    Some(Workload {
        name: format!("{} {} {rows}x{cols}", form.name(), dt.name()),
        kernel,
        params: vec![
            Param::In(TensorSpec {
                init: Init::Uniform {
                    low: -4.0,
                    high: 4.0,
                    seed: 5,
                },
                ..uni(dt, &[rows, cols], 5)
            }),
            Param::Out(zeros(dt, &[rows, cols])),
        ],
        grid,
        reference: Some(Box::new(move |i, _| {
            all(softmax::row_softmax_reference(&i[0], c))
        })),
        metric: Metric::Bytes((2 * rows * cols) as f64 * dt.bytes() as f64),
        flush_l2: true,
    })
}

/// `C = A · B` in bf16 with f32 accumulation, `m x k` by `k x n`, tiles 128x128x64; persistent: one block
/// per SM. For large problems the reference covers 64 rows spread over `C`.
pub fn gemm(m: i64, n: i64, k: i64, persistent: bool) -> Workload {
    let kernel = if persistent {
        gemm::kernels::gemm_persistent::kernel::<bf16, 128, 128, 64>()
    } else {
        gemm::kernels::gemm::kernel::<bf16, 128, 128, 64>()
    };
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let sample = m * n * k > 1 << 32;
    let reference: Reference = Box::new(move |i, _| {
        if !sample {
            return all(gemm::gemm_reference(&i[0], &i[1], mu, nu, ku));
        }
        let rows: Vec<usize> = (0..64).map(|r| r * (mu - 1) / 63).collect();
        let a: Vec<f32> = rows
            .iter()
            .flat_map(|&r| i[0][r * ku..(r + 1) * ku].iter().copied())
            .collect();
        Expected {
            values: gemm::gemm_reference(&a, &i[1], rows.len(), nu, ku),
            rows: Some(rows),
        }
    });
    Workload {
        name: format!(
            "gemm{} bf16 {m}x{n}x{k}",
            if persistent { "_persistent" } else { "" }
        ),
        kernel,
        params: vec![
            Param::In(uni(Dt::BF16, &[m, k], 6)),
            Param::In(uni(Dt::BF16, &[k, n], 7)),
            Param::Out(zeros(Dt::BF16, &[m, n])),
        ],
        grid: if persistent {
            GridRule::PerSm
        } else {
            GridRule::Derived
        },
        reference: Some(reference),
        metric: Metric::Flops(2.0 * m as f64 * n as f64 * k as f64),
        flush_l2: false,
    }
}

/// RMSNorm (`layer == false`) or LayerNorm of a `rows x cols` matrix, eps 1e-5. Whole-row kernels take
/// a `1 x row_tile(cols)` tile and the derived grid; looped ones walk the row in 1024-wide chunks on a
/// `(rows, 1, 1)` grid. `None` when a whole row does not fit an 8192 tile.
pub fn norm(dt: Dt, rows: i64, cols: i64, layer: bool, looped: bool) -> Option<Workload> {
    use norm::kernels as n;
    let bn = if looped { 1024 } else { row_tile(cols) };
    let kernel = match (layer, looped) {
        (false, false) => pow2_kernel!(dt, bn, n::rms_norm)?,
        (true, false) => pow2_kernel!(dt, bn, n::layer_norm)?,
        (false, true) => pow2_kernel!(dt, bn, n::rms_norm_looped)?,
        (true, true) => pow2_kernel!(dt, bn, n::layer_norm_looped)?,
    };
    let eps = 1e-5f32;
    let c = cols as usize;
    let mut params = vec![
        Param::In(uni(dt, &[rows, cols], 8)),
        Param::In(uni(dt, &[cols], 9)),
    ];
    if layer {
        params.push(Param::In(uni(dt, &[cols], 10)));
    }
    params.push(Param::Scalar(eps));
    params.push(Param::Out(zeros(dt, &[rows, cols])));
    let reference: Reference = if layer {
        Box::new(move |i, s| all(norm::layer_norm_reference(&i[0], &i[1], &i[2], s[0], c)))
    } else {
        Box::new(move |i, s| all(norm::rms_norm_reference(&i[0], &i[1], s[0], c)))
    };
    let u32_rows = u32::try_from(rows).ok()?;
    Some(Workload {
        name: format!(
            "{}{} {} {rows}x{cols}",
            if layer { "layer_norm" } else { "rms_norm" },
            if looped { "_looped" } else { "" },
            dt.name()
        ),
        kernel,
        params,
        grid: if looped {
            GridRule::Fixed((u32_rows, 1, 1))
        } else {
            GridRule::Derived
        },
        reference: Some(reference),
        metric: Metric::Bytes((2 * rows * cols) as f64 * dt.bytes() as f64),
        flush_l2: true,
    })
}

/// Flash attention forward over `[bh, seq, d]` bf16 arrays (tiles 64 x 128, `d` of 64 or 128), scale
/// `1/sqrt(d)`; the derived grid `(bh, ceil(seq/64), 1)`.
pub fn attention(bh: i64, seq: i64, d: i64, causal: bool) -> Option<Workload> {
    use attention::kernels as a;
    let kernel = match (d, causal) {
        (64, false) => a::flash_attention::kernel::<bf16, 64, 128, 64, false>(),
        (64, true) => a::flash_attention::kernel::<bf16, 64, 128, 64, true>(),
        (128, false) => a::flash_attention::kernel::<bf16, 64, 128, 128, false>(),
        (128, true) => a::flash_attention::kernel::<bf16, 64, 128, 128, true>(),
        _ => return None,
    };
    let scale = 1.0 / (d as f32).sqrt();
    let (s, du) = (seq as usize, d as usize);
    let shape = [bh, seq, d];
    let pairs = if causal {
        seq as f64 * (seq + 1) as f64 / 2.0
    } else {
        (seq * seq) as f64
    };
    Some(Workload {
        name: format!(
            "attention{} bf16 {bh}x{seq}x{d}",
            if causal { "_causal" } else { "" }
        ),
        kernel,
        params: vec![
            Param::In(uni(Dt::BF16, &shape, 11)),
            Param::In(uni(Dt::BF16, &shape, 12)),
            Param::In(uni(Dt::BF16, &shape, 13)),
            Param::Scalar(scale),
            Param::Out(zeros(Dt::BF16, &shape)),
        ],
        grid: GridRule::Derived,
        reference: Some(Box::new(move |i, sc| {
            all(attention::attention_reference(
                &i[0], &i[1], &i[2], s, s, du, sc[0], causal,
            ))
        })),
        metric: Metric::Flops(4.0 * bh as f64 * pairs * d as f64),
        flush_l2: false,
    })
}

/// Correctness workloads on ragged shapes (sizes off tile boundaries) of every kernel family.
pub fn checks() -> Vec<Workload> {
    let mut w = vec![
        vadd(Dt::F32, 1_000_003),
        vadd(Dt::BF16, 1_000_003),
        saxpy(1_000_003),
        gemm(1000, 1023, 517, false),
        gemm(1000, 1023, 517, true),
        gemm(4096, 4096, 4096, false),
    ];
    for dt in [Dt::F32, Dt::BF16] {
        w.extend(softmax(dt, 1000, 1023));
        w.extend(softmax(dt, 4097, 129));
        w.extend(norm(dt, 1000, 1023, false, false));
        w.extend(norm(dt, 1000, 1023, true, false));
    }
    for form in SoftmaxForm::VARIANTS {
        w.extend(softmax_form(form, Dt::BF16, 1000, 1023));
        w.extend(softmax_form(form, Dt::F32, 4097, 129));
    }
    w.extend(norm(Dt::BF16, 300, 8191, false, true));
    w.extend(norm(Dt::BF16, 300, 8191, true, true));
    for causal in [false, true] {
        w.extend(attention(8, 1000, 64, causal));
        w.extend(attention(4, 777, 128, causal));
    }
    w
}

/// Benchmark workloads (the shapes of the project's reference numbers).
pub fn benches() -> Vec<Workload> {
    let mut w = vec![
        vadd(Dt::F32, 1 << 28),
        gemm(4096, 4096, 4096, false),
        gemm(4096, 4096, 4096, true),
    ];
    w.extend(softmax(Dt::BF16, 8192, 8192));
    w.extend(softmax(Dt::BF16, 4096, 4096));
    w.extend(softmax(Dt::BF16, 32768, 1024));
    w.extend(softmax(Dt::F32, 8192, 8192));
    for form in SoftmaxForm::VARIANTS {
        for (rows, cols) in [(8192, 8192), (4096, 4096), (32768, 1024)] {
            w.extend(softmax_form(form, Dt::BF16, rows, cols));
        }
    }
    w.extend(norm(Dt::BF16, 16384, 8192, false, true));
    w.extend(norm(Dt::BF16, 8192, 1024, false, false));
    w.extend(norm(Dt::BF16, 16384, 8192, true, true));
    w.extend(norm(Dt::BF16, 8192, 1024, true, false));
    for causal in [false, true] {
        w.extend(attention(128, 4096, 128, causal));
    }
    w
}

/// The tiny launch whose host overhead is measured: one 1024-element f32 vector add (one block).
pub fn tiny() -> Workload {
    vadd(Dt::F32, 1024)
}

/// Every distinct workload (by name): checks, benchmarks and the tiny one — what an AOT bundle for
/// them must hold.
pub fn suite() -> Vec<Workload> {
    let mut seen = std::collections::HashSet::new();
    checks()
        .into_iter()
        .chain(benches())
        .chain([tiny()])
        .filter(|w| seen.insert(w.name.clone()))
        .collect()
}
