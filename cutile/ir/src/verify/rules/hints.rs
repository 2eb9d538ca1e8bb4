//! Optimization hints: allowed keys per op, value types and ranges, per-arch keys.

use super::*;

/// Check optimization hints: keys per arch must be in `allowed`; values typed and in range.
/// `entry_version` enables the entry-specific `num_worker_warps_per_cta` version rule.
pub fn check_hints(
    h: &OptimizationHints,
    allowed: &[&str],
    entry_version: Option<crate::Version>,
) -> R {
    for (arch, dict) in &h.by_arch {
        let arch_ok = arch == "default"
            || arch
                .strip_prefix("sm_")
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !arch_ok {
            return Err(format!(
                "optimization hints key `{arch}` must be `default` or an architecture like `sm_90`"
            ));
        }
        if let Some(v) = entry_version
            && arch == "default"
            && v < crate::V13_3
        {
            return Err(format!(
                "hints keyed `default` need bytecode 13.3 or newer, not {v}"
            ));
        }
        for (key, val) in dict {
            if !allowed.contains(&key.as_str()) {
                return Err(format!(
                    "unknown optimization hint `{arch}.{key}`; allowed here: {}",
                    allowed.join(", ")
                ));
            }
            if key == "allow_tma" {
                if !matches!(val, Attribute::Bool(_)) {
                    return Err(format!("hint `{arch}.allow_tma` must be a bool"));
                }
                continue;
            }
            let n = match val {
                Attribute::Integer { value, .. } => *value as u32 as i32 as i64,
                _ => {
                    return Err(format!(
                        "hint `{arch}.{key}` must be an i32 integer, got {}",
                        attr_text(val)
                    ));
                }
            };
            let ok = match key.as_str() {
                "latency" => (1..=10).contains(&n),
                "occupancy" => (1..=32).contains(&n),
                "num_cta_in_cga" => {
                    let ampere =
                        ["sm_80", "sm_86", "sm_87", "sm_88", "sm_89"].contains(&arch.as_str());
                    (1..=16).contains(&n) && (n & (n - 1)) == 0 && (!ampere || n == 1)
                }
                "num_worker_warps_per_cta" => {
                    let pow2 = (1..=32).contains(&n) && (n & (n - 1)) == 0;
                    match entry_version {
                        Some(v) if v < crate::V13_5 => n == 4 || n == 8,
                        _ => pow2,
                    }
                }
                _ => true,
            };
            if !ok {
                let range = match key.as_str() {
                    "latency" => "1..=10",
                    "occupancy" => "1..=32",
                    "num_cta_in_cga" => "a power of two ≤ 16 (1 on sm_8x)",
                    _ => "a power of two ≤ 32 (4 or 8 before bytecode 13.5)",
                };
                return Err(format!(
                    "hint `{arch}.{key}` = {n} is out of range; expected {range}"
                ));
            }
        }
    }
    Ok(())
}
