//! Cache configuration and how it is read from the environment.
//!
//! | variable | effect |
//! |---|---|
//! | `CUTILE_CACHE_DIR` | disk cache directory |
//! | `XDG_CACHE_HOME` | else `$XDG_CACHE_HOME/cutile/kernels` |
//! | `HOME` | else `$HOME/.cache/cutile/kernels` |
//! | `CUTILE_CACHE=off` (`0`, `false`, `no`, `disabled`) | no disk layer |
//! | `CUTILE_DISABLE_CACHE=1` (`true`, `yes`, `on`) | no disk layer |
//! | `CUTILE_CACHE_MAX_SIZE` | disk size bound: bytes, or with a `K`/`M`/`G` suffix (powers of 1024) |

use std::path::PathBuf;

use super::error::CacheError;

/// Default bound on the disk cache: 1 GiB (cubins are 10–400 KB each).
pub const DEFAULT_MAX_DISK_BYTES: u64 = 1 << 30;

/// How a [`KernelCache`](super::KernelCache) is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// Directory of the disk layer; `None` disables it.
    pub disk_dir: Option<PathBuf>,
    /// Bound on the total size of disk entries; least recently used entries are evicted above it.
    pub max_disk_bytes: u64,
}

impl CacheConfig {
    /// Memory only.
    pub fn memory_only() -> CacheConfig {
        CacheConfig {
            disk_dir: None,
            max_disk_bytes: DEFAULT_MAX_DISK_BYTES,
        }
    }

    /// Memory plus a disk layer in `dir`.
    pub fn in_dir(dir: impl Into<PathBuf>) -> CacheConfig {
        CacheConfig {
            disk_dir: Some(dir.into()),
            max_disk_bytes: DEFAULT_MAX_DISK_BYTES,
        }
    }

    /// Reads the process environment (see the module docs).
    pub fn from_env() -> Result<CacheConfig, CacheError> {
        CacheConfig::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env) with variables from `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<CacheConfig, CacheError> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let max_disk_bytes = match set("CUTILE_CACHE_MAX_SIZE") {
            Some(v) => parse_size(&v).ok_or_else(|| CacheError::Config {
                var: "CUTILE_CACHE_MAX_SIZE",
                value: v,
                expected: "a byte count, optionally with a K, M or G suffix (e.g. 512M)",
            })?,
            None => DEFAULT_MAX_DISK_BYTES,
        };
        let off = set("CUTILE_CACHE").is_some_and(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no" | "disabled"
            )
        }) || set("CUTILE_DISABLE_CACHE").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        });
        let disk_dir = if off {
            None
        } else if let Some(dir) = set("CUTILE_CACHE_DIR") {
            Some(PathBuf::from(dir))
        } else if let Some(xdg) = set("XDG_CACHE_HOME") {
            Some(PathBuf::from(xdg).join("cutile").join("kernels"))
        } else {
            set("HOME").map(|home| PathBuf::from(home).join(".cache/cutile/kernels"))
        };
        Ok(CacheConfig {
            disk_dir,
            max_disk_bytes,
        })
    }
}

/// Parses `"1048576"`, `"512K"`, `"64M"`, `"2G"` (also `KB`/`KiB` spellings) into bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}
