//! `cargo xtask toolchain [--dir D] [--force]`: installs the tileiras toolchain (or verifies an
//! existing one) and prints where it is; [`ensure_toolchain`] gives other commands a working
//! tileiras, installing it on first use.

use std::path::PathBuf;

use cutile::toolchain::install::{InstallEvent, InstallOptions, InstallOutcome, install};
use cutile::toolchain::{Tileiras, ToolchainError, default_install_dir};

use crate::BoxError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Install prefix (default: $CUTILE_TOOLCHAIN_DIR, else ~/.cache/cutile/toolchain/<version>).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Reinstall even if a verified toolchain is already there.
    #[arg(long)]
    pub force: bool,
    /// Python interpreter whose pip installs the wheels.
    #[arg(long, default_value = "python3")]
    pub python: String,
}

fn print_progress(event: InstallEvent<'_>) {
    match event {
        InstallEvent::Stage(s) => eprintln!("==> {s}"),
        InstallEvent::Pip(s) => eprintln!("    {s}"),
    }
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    let mut opts = match &args.dir {
        Some(d) => InstallOptions::new(d),
        None => InstallOptions::at_default_dir()?,
    };
    opts.force = args.force;
    opts.python = args.python.clone().into();
    let inst = install(&opts, &mut print_progress)?;
    let t = Tileiras::at(&inst.tileiras)?;
    let what = match inst.outcome {
        InstallOutcome::AlreadyInstalled => "already installed",
        InstallOutcome::Adopted => "existing install verified",
        InstallOutcome::Installed => "installed and verified",
    };
    let info = t.info();
    let list = |v: Vec<String>| v.join(", ");
    println!("tileiras {} ({what})", t.version());
    println!("  prefix:            {}", inst.prefix.display());
    println!("  tileiras:          {}", info.tileiras.display());
    match &info.tileirdisasm {
        Some(p) => println!("  tileirdisasm:      {}", p.display()),
        None => println!("  tileirdisasm:      (missing)"),
    }
    match &info.nvdisasm {
        Some(p) => println!("  nvdisasm:          {}", p.display()),
        None => println!("  nvdisasm:          (missing)"),
    }
    println!("  ptxas:             {}", info.ptxas.display());
    println!("  libnvvm:           {}", info.libnvvm.display());
    println!(
        "  bytecode versions: {}",
        list(
            t.bytecode_versions()
                .iter()
                .map(|v| v.to_string())
                .collect()
        )
    );
    println!(
        "  GPU archs:         {}",
        list(t.supported_archs().iter().map(|a| a.to_string()).collect())
    );

    // Say so when the normal search would not pick this install.
    match Tileiras::discover() {
        Ok(found) if found.path() == t.path() => {}
        Ok(found) => eprintln!(
            "note: discovery picks {} (via {}), not this install; set CUTILE_TOOLCHAIN_DIR={} or \
             CUTILE_TILEIRAS={} to use it",
            found.path().display(),
            found.source().map(|s| s.to_string()).unwrap_or_default(),
            inst.prefix.display(),
            t.path().display()
        ),
        Err(e) => eprintln!(
            "note: discovery does not find this install ({e}); set CUTILE_TOOLCHAIN_DIR={}",
            inst.prefix.display()
        ),
    }
    Ok(())
}

/// A working tileiras for other xtask commands: the one discovery finds, or, when there is none,
/// a fresh install into the default prefix. A found but broken toolchain is reported, not
/// silently replaced.
pub fn ensure_toolchain() -> Result<Tileiras, BoxError> {
    match Tileiras::discover() {
        Ok(t) => Ok(t),
        Err(ToolchainError::NotFound { .. }) => {
            let prefix = default_install_dir()
                .ok_or("no install location: set CUTILE_TOOLCHAIN_DIR or HOME")?;
            eprintln!(
                "==> tileiras not found; installing it into {}",
                prefix.display()
            );
            let inst = install(&InstallOptions::new(prefix), &mut print_progress)?;
            Ok(Tileiras::at(&inst.tileiras)?)
        }
        Err(e) => Err(e.into()),
    }
}
