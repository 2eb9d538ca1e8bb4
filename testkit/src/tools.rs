//! Where the Tile IR tools are, for tests that cannot use `cutile::toolchain` (`cutile-ir`'s: `cutile`
//! depends on `cutile-ir`). The order is the toolchain's: the `CUTILE_TILEIRAS` / `CUTILE_TILEIRDISASM`
//! variables, then the install of `cargo xtask toolchain` (`$CUTILE_TOOLCHAIN_DIR`, else
//! `$HOME/.cache/cutile/toolchain/<version>`, binaries in `nvidia/cu13/bin`), then `PATH`.

use std::path::PathBuf;

/// The toolchain version `cargo xtask toolchain` installs by default.
pub const TOOLCHAIN_VERSION: &str = "13.5.37";

/// The `bin` directory of the default toolchain install, whether or not it exists: `$CUTILE_TOOLCHAIN_DIR`
/// or `$HOME/.cache/cutile/toolchain/13.5.37`, then `nvidia/cu13/bin`. `None` without either variable.
pub fn toolchain_bin_dir() -> Option<PathBuf> {
    let root = match std::env::var_os("CUTILE_TOOLCHAIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?)
            .join(".cache/cutile/toolchain")
            .join(TOOLCHAIN_VERSION),
    };
    Some(root.join("nvidia/cu13/bin"))
}

/// The first of `$env_var` (taken as given if set: a wrong path is not silently replaced), the default
/// install's `name`, and `name` on `PATH` that is a file.
pub fn find(env_var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env_var) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    if let Some(p) = toolchain_bin_dir().map(|d| d.join(name))
        && p.is_file()
    {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// tileiras: `CUTILE_TILEIRAS`, the default install, `PATH`.
pub fn tileiras() -> Option<PathBuf> {
    find("CUTILE_TILEIRAS", "tileiras")
}

/// tileirdisasm: `CUTILE_TILEIRDISASM`, next to `CUTILE_TILEIRAS`, the default install, `PATH`.
pub fn tileirdisasm() -> Option<PathBuf> {
    if std::env::var_os("CUTILE_TILEIRDISASM").is_none()
        && let Some(t) = std::env::var_os("CUTILE_TILEIRAS")
    {
        let beside = PathBuf::from(t).with_file_name("tileirdisasm");
        if beside.is_file() {
            return Some(beside);
        }
    }
    find("CUTILE_TILEIRDISASM", "tileirdisasm")
}

/// The usual reason text for a missing tool, for [`crate::skip`].
pub fn not_found(tool: &str) -> String {
    format!(
        "{tool} not found (run `cargo xtask toolchain`, or set CUTILE_TILEIRAS / CUTILE_TILEIRDISASM / CUTILE_TOOLCHAIN_DIR)"
    )
}
