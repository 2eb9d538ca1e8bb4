//! CPU references of argmax and top-k (ties go to the smaller index, as torch's CUDA kernels do in
//! practice for argmax; top-k sorted descending).

/// The index of the largest element of each row of `x: [rows, v]` (first on ties).
pub fn argmax(x: &[f32], v: usize) -> Vec<i64> {
    x.chunks(v.max(1))
        .map(|row| {
            let mut b = 0;
            for (i, &e) in row.iter().enumerate() {
                if e > row[b] {
                    b = i;
                }
            }
            b as i64
        })
        .collect()
}

/// The `k` largest values of each row of `x: [rows, v]` and their indices, sorted descending with ties
/// to the smaller index: `([rows, k], [rows, k])`.
pub fn topk(x: &[f32], v: usize, k: usize) -> (Vec<f32>, Vec<i64>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for row in x.chunks(v.max(1)) {
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&a, &b| {
            row[b]
                .partial_cmp(&row[a])
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.cmp(&b))
        });
        for &i in order.iter().take(k) {
            vals.push(row[i]);
            idx.push(i as i64);
        }
    }
    (vals, idx)
}
