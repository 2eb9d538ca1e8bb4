//! Deterministic test inputs: the same seed gives the same values on every machine and run.

/// A xorshift64 stream seeded from `seed` (any value, 0 included).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in [-1, 1), a multiple of 2^-23.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A value in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (self.next_f32() + 1.0) * 0.5 * (hi - lo)
    }
}

/// `n` deterministic values in [-1, 1).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| r.next_f32()).collect()
}

/// `n` deterministic values in [lo, hi).
pub fn uniform(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| r.uniform(lo, hi)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let a = data(1000, 7);
        assert_eq!(a, data(1000, 7));
        assert_ne!(a, data(1000, 8));
        assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(!data(4, 0).iter().all(|&x| x == 0.0));
        let u = uniform(1000, 3, 2.0, 5.0);
        assert!(u.iter().all(|x| (2.0..5.0).contains(x)));
    }
}
