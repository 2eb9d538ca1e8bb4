//! Tolerance checks built on `approx`: element-wise [`all_close`] / [`assert_all_close`] (absolute `atol`
//! first, then `rtol` relative to the larger magnitude, as `approx::relative_eq!`; NaN never matches) and
//! the error summaries [`rel_l2`] and [`max_abs_err`].

use std::fmt;

use approx::RelativeEq;

/// Why two slices are not close: the first mismatching index (or a length difference) and how many differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Number of elements out of tolerance (0 for a length mismatch).
    pub count: usize,
    pub len: usize,
    /// A description of the first difference and a few more.
    pub detail: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            write!(f, "{}", self.detail)
        } else {
            write!(
                f,
                "{} of {} elements differ; {}",
                self.count, self.len, self.detail
            )
        }
    }
}

impl std::error::Error for Mismatch {}

/// `Ok` if `got` and `want` have the same length and every pair is within `atol` absolutely or `rtol`
/// relatively (`approx::relative_eq!`); else the first mismatching index and up to 8 mismatches.
pub fn all_close<T>(
    got: &[T],
    want: &[T],
    atol: T::Epsilon,
    rtol: T::Epsilon,
) -> Result<(), Mismatch>
where
    T: RelativeEq + fmt::Debug,
    T::Epsilon: Copy,
{
    if got.len() != want.len() {
        return Err(Mismatch {
            count: 0,
            len: got.len(),
            detail: format!("lengths differ: got {}, want {}", got.len(), want.len()),
        });
    }
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| !got[i].relative_eq(&want[i], atol, rtol))
        .collect();
    let Some(&first) = bad.first() else {
        return Ok(());
    };
    let shown: Vec<String> = bad
        .iter()
        .take(8)
        .map(|&i| format!("[{i}] {:?} vs {:?}", got[i], want[i]))
        .collect();
    Err(Mismatch {
        count: bad.len(),
        len: got.len(),
        detail: format!(
            "first at index {first}: got {:?}, want {:?}; {}",
            got[first],
            want[first],
            shown.join(", ")
        ),
    })
}

/// Panics, naming `what` and the first mismatching index, unless [`all_close`] holds.
#[track_caller]
pub fn assert_all_close<T>(what: &str, got: &[T], want: &[T], atol: T::Epsilon, rtol: T::Epsilon)
where
    T: RelativeEq + fmt::Debug,
    T::Epsilon: Copy,
{
    if let Err(m) = all_close(got, want, atol, rtol) {
        panic!("{what}: {m}");
    }
}

/// ‖got − want‖₂ / ‖want‖₂ in f64 (the plain ‖got − want‖₂ when `want` is all zeros); infinite for a length
/// mismatch or a NaN.
pub fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let (mut diff, mut norm) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        let d = f64::from(g) - f64::from(w);
        diff += d * d;
        norm += f64::from(w) * f64::from(w);
    }
    let e = if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    };
    if e.is_nan() { f64::INFINITY } else { e }
}

/// The largest |got − want|: infinite for a length mismatch or a NaN on one side only (NaN on both sides,
/// e.g. a fully masked row, agrees).
pub fn max_abs_err(got: &[f32], want: &[f32]) -> f32 {
    if got.len() != want.len() {
        return f32::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(g, w)| match (g.is_nan(), w.is_nan()) {
            (true, true) => 0.0,
            (false, false) => (g - w).abs(),
            _ => f32::INFINITY,
        })
        .fold(0.0, f32::max)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn close_and_not() {
        assert!(all_close(&[1.0f32, 2.0], &[1.0, 2.0 + 1e-7], 1e-6, 0.0).is_ok());
        assert!(all_close(&[100.0f32], &[100.5], 0.0, 1e-2).is_ok());
        let e = all_close(&[1.0f32, 2.0, 3.0], &[1.0, 2.5, 3.5], 1e-3, 0.0).unwrap_err();
        assert_eq!(e.count, 2);
        assert!(e.to_string().contains("first at index 1"), "{e}");
        assert!(all_close(&[f32::NAN], &[f32::NAN], 1.0, 1.0).is_err());
        assert!(all_close(&[1.0f32], &[1.0, 2.0], 1.0, 1.0).is_err());
        assert!(all_close(&[1.0f64], &[1.0], 0.0, 0.0).is_ok());
    }

    #[test]
    fn rel_l2_values() {
        assert_eq!(rel_l2(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((rel_l2(&[3.0, 0.0], &[4.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(rel_l2(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(max_abs_err(&[1.0, 5.0], &[1.5, 4.0]), 1.0);
        assert_eq!(max_abs_err(&[f32::NAN], &[f32::NAN]), 0.0);
        assert_eq!(max_abs_err(&[f32::NAN], &[0.0]), f32::INFINITY);
    }

    #[test]
    #[should_panic(expected = "x: 1 of 2 elements differ; first at index 1")]
    fn assert_names_the_index() {
        assert_all_close("x", &[0.0f32, 1.0], &[0.0, 2.0], 0.0, 0.0);
    }
}
