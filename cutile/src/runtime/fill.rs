//! Host-side generators for tensor fills (`arange`, seeded uniform random values).
//!
//! Values are generated on the host and uploaded: fills are for tests, benchmarks and examples, where
//! reproducibility across machines matters more than fill speed. The generator is SplitMix64, so a seed
//! gives the same values everywhere.

use super::dtype::DeviceElement;

/// `0, 1, 2, …, n - 1` converted to `T` (saturating for narrow integers).
pub fn arange<T: DeviceElement>(n: usize) -> Vec<T> {
    (0..n).map(|i| T::from_f64(i as f64)).collect()
}

/// SplitMix64: small, fast, and statistically good enough for test data.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// `n` values uniform in `[low, high)`, converted to `T`; integer types get `floor` of the value, so
/// every integer in `[low, high)` is equally likely when both bounds are integers.
pub fn uniform<T: DeviceElement>(n: usize, low: f64, high: f64, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64::new(seed);
    let float = T::DTYPE.is_float();
    (0..n)
        .map(|_| {
            let v = low + (high - low) * rng.next_f64();
            T::from_f64(if float { v } else { v.floor() })
        })
        .collect()
}

/// The default range of [`random`]: `[-1, 1)` for floats, `[-64, 64)` for signed and `[0, 128)` for
/// unsigned integers (exact in every element type, including `i8` and `f16`).
pub fn default_range<T: DeviceElement>() -> (f64, f64) {
    let d = T::DTYPE;
    if d.is_float() {
        (-1.0, 1.0)
    } else if d.is_signed() {
        (-64.0, 64.0)
    } else {
        (0.0, 128.0)
    }
}

/// `n` seeded random values in [`default_range`].
pub fn random<T: DeviceElement>(n: usize, seed: u64) -> Vec<T> {
    let (low, high) = default_range::<T>();
    uniform(n, low, high, seed)
}
