//! Where the installed toolchain lives: the default prefix and the pip `--target` layout inside it
//! (`<prefix>/nvidia/cu13/{bin,lib}`), shared by discovery and the installer.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{TILEIRAS_VERSION, WHEEL_NVCC, WHEEL_NVDISASM, WHEEL_NVVM, WHEEL_TILEIRAS};

/// Env var naming the install prefix itself (overrides the cache location).
pub const ENV_TOOLCHAIN_DIR: &str = "CUTILE_TOOLCHAIN_DIR";

/// The install prefix this process uses: `$CUTILE_TOOLCHAIN_DIR`, else
/// `$XDG_CACHE_HOME/cutile/toolchain/13.5.37`, else `$HOME/.cache/cutile/toolchain/13.5.37`.
/// `None` when none of those variables is usable.
pub fn default_install_dir() -> Option<PathBuf> {
    install_dir_from(
        std::env::var_os(ENV_TOOLCHAIN_DIR),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`default_install_dir`] from explicit variable values (empty values count as unset; a relative
/// XDG_CACHE_HOME is ignored, as the XDG spec requires).
pub fn install_dir_from(
    toolchain_dir: Option<OsString>,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let set = |v: Option<OsString>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(toolchain_dir) {
        return Some(dir);
    }
    let cache = set(xdg_cache_home)
        .filter(|p| p.is_absolute())
        .or_else(|| set(home).map(|h| h.join(".cache")))?;
    Some(
        cache
            .join("cutile")
            .join("toolchain")
            .join(TILEIRAS_VERSION),
    )
}

/// The file layout of a prefix made by `pip install --no-deps --target <prefix>` of the four wheels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolchainLayout {
    prefix: PathBuf,
}

/// Name of the file written into a prefix once it has compiled a module successfully.
pub const MARKER_FILE: &str = ".cutile-toolchain-verified";

impl ToolchainLayout {
    pub fn new(prefix: impl Into<PathBuf>) -> ToolchainLayout {
        ToolchainLayout {
            prefix: prefix.into(),
        }
    }

    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// `<prefix>/nvidia/cu13/bin`.
    pub fn bin_dir(&self) -> PathBuf {
        self.prefix.join("nvidia").join("cu13").join("bin")
    }

    pub fn tileiras(&self) -> PathBuf {
        self.bin_dir().join("tileiras")
    }

    pub fn tileirdisasm(&self) -> PathBuf {
        self.bin_dir().join("tileirdisasm")
    }

    pub fn ptxas(&self) -> PathBuf {
        self.bin_dir().join("ptxas")
    }

    pub fn nvdisasm(&self) -> PathBuf {
        self.bin_dir().join("nvdisasm")
    }

    /// `<prefix>/nvidia/cu13/lib/libnvvm.so.4` (the nvidia-nvvm wheel's location).
    pub fn libnvvm(&self) -> PathBuf {
        self.prefix
            .join("nvidia")
            .join("cu13")
            .join("lib")
            .join("libnvvm.so.4")
    }

    /// The verification marker.
    pub fn marker(&self) -> PathBuf {
        self.prefix.join(MARKER_FILE)
    }

    /// Each file a complete install needs, with the wheel that provides it. A prefix installed
    /// before nvdisasm was one of them is incomplete, so the installer brings it up to date.
    pub fn required_files(&self) -> [(&'static str, PathBuf); 5] {
        [
            (WHEEL_TILEIRAS, self.tileiras()),
            (WHEEL_TILEIRAS, self.tileirdisasm()),
            (WHEEL_NVCC, self.ptxas()),
            (WHEEL_NVVM, self.libnvvm()),
            (WHEEL_NVDISASM, self.nvdisasm()),
        ]
    }

    /// The first required file that is missing, with its wheel.
    pub fn first_missing(&self) -> Option<(&'static str, PathBuf)> {
        self.required_files()
            .into_iter()
            .find(|(_, p)| !p.is_file())
    }

    /// All required files present and the marker written: a verified install.
    pub fn is_complete(&self) -> bool {
        self.marker().is_file() && self.first_missing().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_dir_precedence() {
        let s = |v: &str| Some(OsString::from(v));
        let v = TILEIRAS_VERSION;
        type Var = Option<OsString>;
        let cases: Vec<(Var, Var, Var, Option<String>)> = vec![
            (
                s("/opt/tc"),
                s("/xdg"),
                s("/home/u"),
                Some("/opt/tc".into()),
            ),
            (
                s(""),
                s("/xdg"),
                s("/home/u"),
                Some(format!("/xdg/cutile/toolchain/{v}")),
            ),
            (
                None,
                s("rel"),
                s("/home/u"),
                Some(format!("/home/u/.cache/cutile/toolchain/{v}")),
            ),
            (
                None,
                None,
                s("/home/u"),
                Some(format!("/home/u/.cache/cutile/toolchain/{v}")),
            ),
            (None, None, None, None),
        ];
        for (t, x, h, want) in cases {
            assert_eq!(install_dir_from(t, x, h), want.map(PathBuf::from));
        }
    }

    #[test]
    fn pip_layout() {
        let l = ToolchainLayout::new("/p");
        assert_eq!(l.tileiras(), Path::new("/p/nvidia/cu13/bin/tileiras"));
        assert_eq!(l.libnvvm(), Path::new("/p/nvidia/cu13/lib/libnvvm.so.4"));
        assert_eq!(l.first_missing().map(|(w, _)| w), Some(WHEEL_TILEIRAS));
        assert!(!l.is_complete());
    }
}
