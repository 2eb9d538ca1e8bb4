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

/// SplitMix64: small, fast, and statistically good enough for test data. Its state advances by a
/// constant, so the generator can start at any position of a seed's sequence ([`SplitMix64::at`]).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

/// SplitMix64's state increment.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The generator of `seed` after `skip` draws.
    pub fn at(seed: u64, skip: u64) -> Self {
        SplitMix64(seed.wrapping_add(skip.wrapping_mul(GAMMA)))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
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
/// every integer in `[low, high)` is equally likely when both bounds are integers. Large fills are
/// generated on every CPU, each thread starting its chunk at its position of the sequence, so the
/// values do not depend on the thread count (a GPU check's inputs reach 10⁹ elements).
pub fn uniform<T: DeviceElement>(n: usize, low: f64, high: f64, seed: u64) -> Vec<T> {
    let float = T::DTYPE.is_float();
    let fill = |out: &mut [T], start: usize| {
        let mut rng = SplitMix64::at(seed, start as u64);
        for x in out {
            let v = low + (high - low) * rng.next_f64();
            *x = T::from_f64(if float { v } else { v.floor() });
        }
    };
    let mut out = vec![T::from_f64(0.0); n];
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    if n < PARALLEL_FILL || threads == 1 {
        fill(&mut out, 0);
        return out;
    }
    let chunk = n.div_ceil(threads);
    std::thread::scope(|s| {
        for (k, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || fill(part, k * chunk));
        }
    });
    out
}

/// Elements from which [`uniform`] splits its work over threads.
const PARALLEL_FILL: usize = 1 << 20;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The threaded fill gives the values of one generator drawn in order, across chunk boundaries
    /// and for integer types too.
    #[test]
    fn threaded_fill_is_the_sequential_sequence() {
        let n = PARALLEL_FILL * 3 + 12_345;
        let mut rng = SplitMix64::new(7);
        let want: Vec<f32> = (0..n)
            .map(|_| (-1.0 + 2.0 * rng.next_f64()) as f32)
            .collect();
        assert_eq!(uniform::<f32>(n, -1.0, 1.0, 7), want);
        let mut rng = SplitMix64::new(9);
        let want: Vec<i32> = (0..n)
            .map(|_| (-64.0 + 128.0 * rng.next_f64()).floor() as i32)
            .collect();
        assert_eq!(uniform::<i32>(n, -64.0, 64.0, 9), want);
    }

    #[test]
    fn at_skips_draws() {
        let mut a = SplitMix64::new(3);
        for _ in 0..1000 {
            a.next_u64();
        }
        assert_eq!(a.next_u64(), SplitMix64::at(3, 1000).next_u64());
    }
}
