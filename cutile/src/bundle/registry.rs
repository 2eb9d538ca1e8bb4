//! Sets of loaded bundles consulted by the kernel lookup chain, and the process-wide set.

use std::ffi::OsStr;
use std::sync::{Arc, OnceLock, RwLock};

use super::{Bundle, BundleError};
use crate::key::CacheKey;

/// Paths of bundles to load at first use, separated like `PATH` (`:` on Unix).
pub const ENV_VAR: &str = "CUTILE_BUNDLE";

/// Bundles searched in the order they were added.
#[derive(Debug, Default)]
pub struct BundleSet {
    bundles: RwLock<Vec<Arc<Bundle>>>,
    /// Why the bundles named in the environment could not be loaded (global set only).
    load_error: Option<Arc<BundleError>>,
}

impl BundleSet {
    pub fn new() -> BundleSet {
        BundleSet::default()
    }

    pub fn add(&self, bundle: Bundle) {
        self.bundles
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(bundle));
    }

    /// Opens and adds every bundle in a `PATH`-style list; stops at the first that fails.
    pub fn add_paths(&self, list: &OsStr) -> Result<usize, BundleError> {
        let mut n = 0;
        for path in std::env::split_paths(list).filter(|p| !p.as_os_str().is_empty()) {
            self.add(Bundle::open(&path)?);
            n += 1;
        }
        Ok(n)
    }

    pub fn len(&self) -> usize {
        self.bundles.read().map(|b| b.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first cubin matching `key` (ignoring its tileiras version; see [`Bundle::find_key`]).
    /// Fails if bundles named in [`ENV_VAR`] could not be loaded, so a broken deployment is reported
    /// instead of silently compiling.
    pub fn find_key(&self, key: &CacheKey) -> Result<Option<Arc<[u8]>>, Arc<BundleError>> {
        if let Some(e) = &self.load_error {
            return Err(e.clone());
        }
        let bundles = self.bundles.read().unwrap_or_else(|p| p.into_inner());
        Ok(bundles.iter().find_map(|b| b.find_key(key)).map(Arc::from))
    }
}

/// The process-wide bundle set; on first use it loads the bundles named in [`ENV_VAR`].
pub fn global() -> &'static BundleSet {
    static GLOBAL: OnceLock<BundleSet> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let mut set = BundleSet::new();
        if let Some(list) = std::env::var_os(ENV_VAR)
            && let Err(e) = set.add_paths(&list)
        {
            set.load_error = Some(Arc::new(e));
        }
        set
    })
}

/// Adds a bundle to the process-wide set.
pub fn register(bundle: Bundle) {
    global().add(bundle);
}
