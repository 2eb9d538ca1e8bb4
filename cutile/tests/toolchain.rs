//! Toolchain driver tests: discovery order, validation, exit-code mapping, timeouts and environment
//! cleaning against small shell-script fakes of tileiras; the installer against a fake python/pip;
//! and real compiles, disassembly and tile-library packaging when a real tileiras is found (skipped,
//! with a message, when none is).

#![cfg(unix)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

use cutile::toolchain::install::{
    InstallError, InstallEvent, InstallOptions, InstallOutcome, install,
};
use cutile::toolchain::{
    CLEARED_ENV, CompileRequest, ExitKind, GpuArch, MINIMAL_MODULE, SearchEnv, SearchSource,
    Tileiras, ToolchainError, ToolchainLayout, locate,
};
use tempfile::TempDir;

const POISON: &str = "/nonexistent/cutile-test-poisoned-cuda";

/// Points CUDA_HOME/CUDA_PATH/CUDA_ROOT at a tree that does not exist. A real tileiras inheriting
/// them fails every compile (exit 5), so the real-compile tests also prove the driver removes them.
fn poison_cuda_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for v in CLEARED_ENV {
            // SAFETY: std serialises its own environment accesses (set_var, var, Command spawn)
            // with a lock, and nothing in this test process reads the environment from C code.
            unsafe { std::env::set_var(v, POISON) };
        }
    });
}

fn write_exe(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(path, text).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Answers the validation probes like tileiras 13.5 (bytecode 13.1 and 13.5 only; four GPU names),
/// sets `$out` to the `-o` argument, then runs `body`.
fn fake_tileiras_script(body: &str) -> String {
    format!(
        r#"#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 13.5, V13.5.37"; exit 0;;
  --list-versions) printf '13.1\n13.5\n'; exit 0;;
  --help) printf '  --gpu-name=<value> - name\n    =sm_80 - a\n    =sm_90 - b\n    =sm_100 - c\n    =sm_120 - d\n  --host-arch=<value> - h\n'; exit 0;;
esac
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
{body}
"#
    )
}

/// Writes the start of a 64-bit CUDA ELF (EM_CUDA = 190 = octal 276) to `$out`.
const WRITE_ELF: &str = r"printf '\177ELF\002\001\001\101\010\0\0\0\0\0\0\0\002\0\276\0' > $out";

/// A fake toolchain prefix in the pip layout.
struct Fake {
    dir: TempDir,
}

impl Fake {
    fn new(body: &str) -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = ToolchainLayout::new(dir.path());
        write_exe(&layout.tileiras(), &fake_tileiras_script(body));
        write_exe(&layout.tileirdisasm(), "#!/bin/sh\necho 'entry @k() {'\n");
        write_exe(&layout.ptxas(), "#!/bin/sh\nexit 0\n");
        std::fs::create_dir_all(layout.libnvvm().parent().expect("lib dir")).expect("mkdir");
        std::fs::write(layout.libnvvm(), b"").expect("write libnvvm");
        Fake { dir }
    }
    fn layout(&self) -> ToolchainLayout {
        ToolchainLayout::new(self.dir.path())
    }
    fn tileiras(&self) -> Tileiras {
        Tileiras::at(self.layout().tileiras()).expect("fake validates")
    }
}

fn variant(e: &ToolchainError) -> &'static str {
    match e {
        ToolchainError::BadOption(_) => "BadOption",
        ToolchainError::InvalidOptionCombination(_) => "InvalidOptionCombination",
        ToolchainError::InvalidBytecode(_) => "InvalidBytecode",
        ToolchainError::BackendFailure(_) => "BackendFailure",
        ToolchainError::ToolFailed(_) => "ToolFailed",
        ToolchainError::Timeout(_) => "Timeout",
        ToolchainError::MalformedOutput { .. } => "MalformedOutput",
        ToolchainError::ArchNotAccepted { .. } => "ArchNotAccepted",
        ToolchainError::BytecodeVersionUnsupported { .. } => "BytecodeVersionUnsupported",
        _ => "other",
    }
}

// ---------------------------------------------------------------------------------------------
// Discovery

struct Tree {
    _dir: TempDir,
    root: PathBuf,
}

/// One tileiras per search rule, plus a PATH dir holding a non-executable one.
fn discovery_tree() -> Tree {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    for p in [
        "env/tileiras",
        "install/nvidia/cu13/bin/tileiras",
        "toolkit/bin/tileiras",
        "std/bin/tileiras",
        "path2/tileiras",
    ] {
        write_exe(&root.join(p), "#!/bin/sh\n");
    }
    std::fs::create_dir_all(root.join("path1")).expect("mkdir");
    std::fs::write(root.join("path1/tileiras"), "not executable").expect("write");
    Tree { _dir: dir, root }
}

fn full_env(root: &Path) -> SearchEnv {
    SearchEnv {
        tileiras: Some(root.join("env/tileiras")),
        install_dir: Some(root.join("install")),
        cuda_toolkit_path: Some(root.join("toolkit")),
        standard_dirs: vec![root.join("std")],
        path: Some(std::env::join_paths([root.join("path1"), root.join("path2")]).expect("join")),
    }
}

#[test]
fn discovery_follows_the_precedence_order() {
    let tree = discovery_tree();
    let r = &tree.root;
    // Each step removes the winner of the previous one.
    type Step<'a> = (&'a dyn Fn(&mut SearchEnv), SearchSource, &'a str);
    let steps: [Step; 5] = [
        (&|_| {}, SearchSource::EnvTileiras, "env/tileiras"),
        (
            &|e| e.tileiras = None,
            SearchSource::InstallDir,
            "install/nvidia/cu13/bin/tileiras",
        ),
        (
            &|e| e.install_dir = None,
            SearchSource::CudaToolkitPath,
            "toolkit/bin/tileiras",
        ),
        (
            &|e| e.cuda_toolkit_path = None,
            SearchSource::StandardLocation,
            "std/bin/tileiras",
        ),
        (
            &|e| e.standard_dirs.clear(),
            SearchSource::Path,
            "path2/tileiras",
        ),
    ];
    let mut env = full_env(r);
    for (change, source, path) in steps {
        change(&mut env);
        let found = locate(&env).expect("found");
        assert_eq!(found.source, source);
        assert_eq!(found.tileiras, r.join(path));
        assert_eq!(
            found.searched.last().map(|s| s.outcome.as_str()),
            Some("found")
        );
    }
    // The non-executable file in path1 was looked at and skipped.
    let found = locate(&env).expect("found");
    assert!(
        found
            .searched
            .iter()
            .any(|s| s.path.as_deref() == Some(&r.join("path1/tileiras"))
                && s.outcome == "not executable"),
        "{:?}",
        found.searched
    );
}

#[test]
fn not_found_lists_every_place_and_the_fix() {
    let tree = discovery_tree();
    let r = &tree.root;
    let env = SearchEnv {
        tileiras: None,
        install_dir: Some(r.join("nothing-installed")),
        cuda_toolkit_path: Some(r.join("no-toolkit")),
        standard_dirs: vec![r.join("no-std")],
        path: Some(std::env::join_paths([r.join("path1"), r.join("empty")]).expect("join")),
    };
    let err = locate(&env).expect_err("nothing usable");
    let ToolchainError::NotFound { searched } = &err else {
        panic!("expected NotFound, got {err}");
    };
    assert_eq!(searched.len(), 6, "{searched:?}");
    let msg = err.to_string();
    for needle in [
        "$CUTILE_TILEIRAS: not set".to_owned(),
        r.join("nothing-installed/nvidia/cu13/bin/tileiras")
            .display()
            .to_string(),
        r.join("no-toolkit/bin/tileiras").display().to_string(),
        r.join("no-std/bin/tileiras").display().to_string(),
        format!("{} (not executable)", r.join("path1/tileiras").display()),
        r.join("empty/tileiras").display().to_string(),
        "cargo xtask toolchain".to_owned(),
        "nvidia-cuda-tileiras==13.5.37 nvidia-nvvm==13.5.37 nvidia-cuda-nvcc==13.5.37".to_owned(),
        "CUTILE_TILEIRAS=".to_owned(),
    ] {
        assert!(msg.contains(&needle), "missing {needle:?} in:\n{msg}");
    }
}

#[test]
fn explicit_env_path_must_be_usable() {
    let tree = discovery_tree();
    let mut env = full_env(&tree.root);
    env.tileiras = Some(tree.root.join("env/missing"));
    let err = locate(&env).expect_err("bad explicit path");
    assert!(
        matches!(err, ToolchainError::EnvPathInvalid { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("is missing"), "{err}");
}

#[test]
fn discover_in_validates_the_find() {
    let fake = Fake::new(WRITE_ELF);
    let env = SearchEnv {
        install_dir: Some(fake.dir.path().to_path_buf()),
        ..SearchEnv::default()
    };
    let t = Tileiras::discover_in(&env).expect("fake found and validated");
    assert_eq!(t.source(), Some(SearchSource::InstallDir));
    assert_eq!(t.version().to_string(), "13.5.37");
    let bc: Vec<String> = t
        .bytecode_versions()
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert_eq!(bc, ["13.1", "13.5"]);
    assert_eq!(
        t.supported_archs(),
        [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120]
    );
    assert_eq!(
        t.tileirdisasm(),
        Some(fake.layout().tileirdisasm().as_path())
    );
    assert_eq!(t.info().libnvvm, fake.layout().libnvvm());
}

/// nvdisasm is optional next to tileiras: without it [`Tileiras::sass`] names the wheel that ships
/// it; with it, its output is returned and a failing run keeps its input.
#[test]
fn sass_needs_nvdisasm_and_reports_its_failures() {
    let fake = Fake::new(WRITE_ELF);
    let t = Tileiras::at(fake.layout().tileiras()).expect("fake validates");
    assert_eq!(t.nvdisasm(), None);
    let err = t.sass(b"not a cubin").expect_err("no nvdisasm");
    assert!(
        matches!(err, ToolchainError::MissingNvdisasm { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("nvidia-cuda-nvdisasm==13.5.37"),
        "{err}"
    );

    let fake = Fake::new(WRITE_ELF);
    write_exe(
        &fake.layout().nvdisasm(),
        "#!/bin/sh\n[ \"$1\" = -c ] || exit 9\necho '        /*0000*/   MUFU.EX2 R1, R2 ;'\n",
    );
    let t = Tileiras::at(fake.layout().tileiras()).expect("fake validates");
    assert_eq!(t.nvdisasm(), Some(fake.layout().nvdisasm().as_path()));
    assert!(t.sass(b"cubin").expect("runs").contains("MUFU.EX2"));

    let fake = Fake::new(WRITE_ELF);
    write_exe(
        &fake.layout().nvdisasm(),
        "#!/bin/sh\necho 'bad cubin' >&2\nexit 1\n",
    );
    let t = Tileiras::at(fake.layout().tileiras()).expect("fake validates");
    match t.sass(b"cubin") {
        Err(ToolchainError::ToolFailed(f)) => assert!(f.stderr.contains("bad cubin"), "{f:?}"),
        other => panic!("expected ToolFailed, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Validation

#[test]
fn missing_pieces_name_their_wheel() {
    let fake = Fake::new(WRITE_ELF);
    std::fs::remove_file(fake.layout().libnvvm()).expect("rm");
    let err = Tileiras::at(fake.layout().tileiras()).expect_err("no libnvvm");
    assert!(
        matches!(err, ToolchainError::MissingLibnvvm { .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("nvidia-nvvm==13.5.37") && msg.contains("nvvm/lib64/libnvvm.so"),
        "{msg}"
    );

    let fake = Fake::new(WRITE_ELF);
    std::fs::remove_file(fake.layout().ptxas()).expect("rm");
    let on_path = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|d| d.join("ptxas").is_file());
    match Tileiras::at(fake.layout().tileiras()) {
        Err(e @ ToolchainError::MissingPtxas { .. }) => {
            assert!(!on_path);
            assert!(e.to_string().contains("nvidia-cuda-nvcc==13.5.37"), "{e}");
        }
        Ok(t) => {
            assert!(on_path, "validated without any ptxas");
            eprintln!(
                "note: ptxas is on PATH ({}), so the missing-ptxas error is not exercised",
                t.info().ptxas.display()
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
    }

    let fake = Fake::new(WRITE_ELF);
    std::fs::remove_file(fake.layout().tileirdisasm()).expect("rm");
    let t = fake.tileiras();
    assert_eq!(t.tileirdisasm(), None);
    let err = t
        .disassemble(&MINIMAL_MODULE, false)
        .expect_err("no disassembler");
    assert!(err.to_string().contains("nvidia-cuda-tileiras"), "{err}");
}

#[test]
fn a_tool_that_is_not_tileiras_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = ToolchainLayout::new(dir.path());
    write_exe(&layout.tileiras(), "#!/bin/sh\necho hello\n");
    let err = Tileiras::at(layout.tileiras()).expect_err("not tileiras");
    assert!(
        matches!(
            err,
            ToolchainError::Probe {
                probe: "--version",
                ..
            }
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Running: exit codes, timeouts, environment

#[test]
fn exit_codes_map_to_typed_errors() {
    poison_cuda_env();
    let cases = [
        (
            "echo 'error: unknown preview feature' >&2; exit 1",
            "BadOption",
            ExitKind::Code(1),
        ),
        (
            "echo 'error: optimized debugging is currently not supported' >&2; exit 2",
            "InvalidOptionCombination",
            ExitKind::Code(2),
        ),
        (
            "echo 'error: bad section' >&2; echo 'error: input does not correspond to Tile IR bytecode' >&2; exit 3",
            "InvalidBytecode",
            ExitKind::Code(3),
        ),
        (
            "echo 'error: failed to compile Tile IR program' >&2; exit 5",
            "BackendFailure",
            ExitKind::Code(5),
        ),
        (
            "echo 'something odd' >&2; exit 7",
            "ToolFailed",
            ExitKind::Code(7),
        ),
        ("kill -SEGV $$", "ToolFailed", ExitKind::Signal(11)),
        ("exit 0", "MalformedOutput", ExitKind::Code(0)),
        (
            "echo garbage > $out; exit 0",
            "MalformedOutput",
            ExitKind::Code(0),
        ),
    ];
    for (body, want, exit) in cases {
        let fake = Fake::new(body);
        let bytecode = [&MINIMAL_MODULE[..], body.as_bytes()].concat();
        let err = fake
            .tileiras()
            .compile(&bytecode, &CompileRequest::new(GpuArch::Sm90))
            .expect_err(body);
        assert_eq!(variant(&err), want, "{body}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains("env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT"),
            "{msg}"
        );
        if let Some(f) = err.tool_failure() {
            assert_eq!(f.exit, exit, "{body}");
            if let Some(line) = body
                .strip_prefix("echo '")
                .and_then(|b| b.split('\'').next())
            {
                let line = line.strip_prefix("error: ").unwrap_or(line);
                assert!(
                    f.messages.iter().any(|m| m == line),
                    "{body}: {:?}",
                    f.messages
                );
            }
            let kept = f.kept_input.as_deref().expect("input kept");
            assert_eq!(std::fs::read(kept).ok().as_deref(), Some(&bytecode[..]));
            assert!(
                f.reproduce.contains(&kept.display().to_string()),
                "{}",
                f.reproduce
            );
        }
    }
}

#[test]
fn environment_is_cleaned_and_private() {
    poison_cuda_env();
    let fake = Fake::new(&format!(
        "env >&2; echo \"PWD_IS=$(pwd -P)\" >&2; echo \"ARGS=$*\" >&2; {WRITE_ELF}"
    ));
    let mut req = CompileRequest::new(GpuArch::Sm100);
    req.libraries = vec![PathBuf::from("relative/lib.tilelib")];
    let cubin = fake
        .tileiras()
        .compile(&MINIMAL_MODULE, &req)
        .expect("fake compile");
    let env = &cubin.diagnostics;
    for v in CLEARED_ENV {
        assert!(
            std::env::var_os(v).is_some(),
            "the test process should have {v} set"
        );
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{v}="))),
            "{v} leaked:\n{env}"
        );
    }
    let tmpdir = env
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .expect("TMPDIR set");
    let pwd = env
        .lines()
        .find_map(|l| l.strip_prefix("PWD_IS="))
        .expect("pwd");
    let real_tmp = std::fs::canonicalize(tmpdir).ok();
    assert!(
        real_tmp.is_none(),
        "the private directory {tmpdir} should be gone after the run"
    );
    assert_eq!(
        Path::new(pwd).file_name(),
        Path::new(tmpdir).file_name(),
        "runs inside its TMPDIR"
    );
    assert!(
        Path::new(tmpdir)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("cutile-tileiras-"))
    );
    let args = env
        .lines()
        .find_map(|l| l.strip_prefix("ARGS="))
        .expect("args");
    let abs = std::path::absolute("relative/lib.tilelib").expect("absolute");
    assert!(args.contains(&format!("-l {}", abs.display())), "{args}");
    assert!(args.contains("--gpu-name=sm_100 --opt-level=3"), "{args}");
    assert_eq!(cubin.arch, GpuArch::Sm100);
    assert!(cubin.elapsed > Duration::ZERO);
}

#[test]
fn a_hung_compile_is_killed_with_its_children() {
    poison_cuda_env();
    // `sleep` runs as a child of the script: only a process-group kill stops it, and if it
    // survived it would hold stderr open and the call would block for 30 s.
    let fake = Fake::new("sleep 30; exit 0");
    let mut req = CompileRequest::new(GpuArch::Sm90);
    req.timeout = Duration::from_millis(300);
    let start = Instant::now();
    let err = fake
        .tileiras()
        .compile(&MINIMAL_MODULE, &req)
        .expect_err("must time out");
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let ToolchainError::Timeout(t) = &err else {
        panic!("expected Timeout, got {err}");
    };
    assert_eq!(t.limit, Duration::from_millis(300));
    assert!(t.kept_input.as_deref().is_some_and(Path::is_file));
    assert!(err.to_string().contains("raise the timeout"), "{err}");
}

#[test]
fn requests_are_checked_before_running() {
    let fake = Fake::new("echo ran >&2; exit 9");
    let t = fake.tileiras();
    // sm_121 is in our table but this fake's --help does not list it.
    let err = t
        .compile(&MINIMAL_MODULE, &CompileRequest::new(GpuArch::Sm121))
        .expect_err("not accepted");
    assert_eq!(variant(&err), "ArchNotAccepted", "{err}");
    assert!(
        err.to_string().contains("sm_80, sm_90, sm_100, sm_120"),
        "{err}"
    );
    // The fake reads bytecode 13.1 and 13.5 only.
    let mut bc = MINIMAL_MODULE.to_vec();
    bc[9] = 4;
    let err = t
        .compile(&bc, &CompileRequest::new(GpuArch::Sm90))
        .expect_err("13.4 unsupported");
    assert_eq!(variant(&err), "BytecodeVersionUnsupported", "{err}");
    assert!(
        err.to_string().contains("13.4") && err.to_string().contains("13.1, 13.5"),
        "{err}"
    );
    let mut req = CompileRequest::new(GpuArch::Sm90);
    req.opt_level = 7;
    let err = t.compile(&MINIMAL_MODULE, &req).expect_err("bad level");
    assert!(matches!(err, ToolchainError::InvalidRequest(_)), "{err}");
}

#[test]
fn unsupported_arch_text() {
    let err = "sm_75".parse::<GpuArch>().expect_err("unsupported");
    let msg = ToolchainError::from(err).to_string();
    assert_eq!(
        msg,
        "unsupported GPU architecture 'sm_75': tileiras 13.5 supports sm_80, sm_86, sm_87, sm_88, \
         sm_89, sm_90, sm_100, sm_103, sm_107, sm_110, sm_120, sm_121"
    );
}

// ---------------------------------------------------------------------------------------------
// Installer (fake python/pip; no network)

/// A fake `python3` whose `-m pip install --target D` copies `template` into D, or runs `install`.
fn fake_python(dir: &Path, pip_version: &str, install: &str) -> OsString {
    let path = dir.join("python3");
    write_exe(
        &path,
        &format!(
            r#"#!/bin/sh
if [ "$1 $2 $3" = "-m pip --version" ]; then {pip_version}; fi
target=""; prev=""
for a in "$@"; do [ "$prev" = "--target" ] && target="$a"; prev="$a"; done
echo "Collecting $7 (fake)"
{install}
"#
        ),
    );
    path.into_os_string()
}

const PIP_OK: &str = "echo 'pip 99 (fake)'; exit 0";

fn run_install(
    opts: &InstallOptions,
) -> (
    Result<cutile::toolchain::install::Installation, InstallError>,
    Vec<String>,
) {
    let mut log = Vec::new();
    let r = install(opts, &mut |e| match e {
        InstallEvent::Stage(s) => log.push(format!("stage: {s}")),
        InstallEvent::Pip(s) => log.push(format!("pip: {s}")),
    });
    (r, log)
}

#[test]
fn installer_installs_verifies_and_is_idempotent() {
    poison_cuda_env();
    let template = Fake::new(WRITE_ELF);
    write_exe(&template.layout().nvdisasm(), "#!/bin/sh\nexit 0\n");
    let work = tempfile::tempdir().expect("tempdir");
    let python = fake_python(
        work.path(),
        PIP_OK,
        &format!(
            "cp -R '{}'/. \"$target\"/ && exit 0",
            template.dir.path().display()
        ),
    );
    let prefix = work.path().join("cache/cutile/toolchain/13.5.37");
    let mut opts = InstallOptions::new(&prefix);
    opts.python = python.clone();

    let (r, log) = run_install(&opts);
    let inst = r.expect("installs");
    assert_eq!(inst.outcome, InstallOutcome::Installed);
    assert_eq!(inst.tileiras, prefix.join("nvidia/cu13/bin/tileiras"));
    assert!(ToolchainLayout::new(&prefix).is_complete());
    assert!(
        log.iter().any(|l| l.starts_with("pip: Collecting")),
        "{log:?}"
    );
    assert!(log.iter().any(|l| l.contains("verifying")), "{log:?}");
    let leftovers: Vec<_> = std::fs::read_dir(prefix.parent().expect("parent"))
        .expect("ls")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "13.5.37")
        .collect();
    assert!(leftovers.is_empty(), "staging left behind: {leftovers:?}");

    // A verified prefix is a no-op: a python that does not exist is never called.
    opts.python = work.path().join("no-python").into_os_string();
    let (r, _) = run_install(&opts);
    assert_eq!(r.expect("no-op").outcome, InstallOutcome::AlreadyInstalled);

    // Unmarked but complete (made by hand with pip): verified and adopted, still without pip.
    std::fs::remove_file(ToolchainLayout::new(&prefix).marker()).expect("rm marker");
    let (r, _) = run_install(&opts);
    assert_eq!(r.expect("adopted").outcome, InstallOutcome::Adopted);
    assert!(ToolchainLayout::new(&prefix).is_complete());

    // A prefix from before nvdisasm was one of the wheels is incomplete: installing again brings it
    // up to date (with pip).
    std::fs::remove_file(ToolchainLayout::new(&prefix).nvdisasm()).expect("rm nvdisasm");
    assert!(!ToolchainLayout::new(&prefix).is_complete());
    opts.python = python;
    let (r, _) = run_install(&opts);
    assert_eq!(r.expect("upgraded").outcome, InstallOutcome::Installed);
    assert!(ToolchainLayout::new(&prefix).is_complete());
    opts.python = work.path().join("no-python").into_os_string();

    // --force reinstalls, so it does need python; the existing install survives the failure.
    opts.force = true;
    let (r, _) = run_install(&opts);
    assert!(
        matches!(r, Err(InstallError::PythonMissing { .. })),
        "{r:?}"
    );
    assert!(ToolchainLayout::new(&prefix).is_complete());
}

#[test]
fn installer_errors_name_the_missing_piece() {
    let template = Fake::new(WRITE_ELF);
    let work = tempfile::tempdir().expect("tempdir");
    let prefix = work.path().join("tc");
    let no_nvvm = format!(
        "cp -R '{}'/. \"$target\"/ && rm \"$target/nvidia/cu13/lib/libnvvm.so.4\" && exit 0",
        template.dir.path().display()
    );
    let cases: [(&str, String, String, &str, &str); 4] = [
        ("missing", String::new(), String::new(), "PythonMissing", "apt install python3"),
        ("nopip", "echo '/usr/bin/python3: No module named pip' >&2; exit 1".into(), String::new(), "PipMissing", "-m ensurepip"),
        (
            "offline",
            PIP_OK.into(),
            "echo 'ERROR: Could not find a version that satisfies the requirement nvidia-nvvm==13.5.37' >&2; exit 1".into(),
            "RegistryUnreachable",
            "Could not find a version",
        ),
        ("incomplete", PIP_OK.into(), no_nvvm, "WheelIncomplete", "nvidia-nvvm==13.5.37"),
    ];
    for (name, pip_version, body, want, needle) in cases {
        let dir = work.path().join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut opts = InstallOptions::new(&prefix);
        opts.python = if name == "missing" {
            dir.join("python3").into_os_string()
        } else {
            fake_python(&dir, &pip_version, &body)
        };
        let (r, _) = run_install(&opts);
        let err = r.expect_err(name);
        let got = match &err {
            InstallError::PythonMissing { .. } => "PythonMissing",
            InstallError::PipMissing { .. } => "PipMissing",
            InstallError::RegistryUnreachable { .. } => "RegistryUnreachable",
            InstallError::WheelIncomplete { .. } => "WheelIncomplete",
            _ => "other",
        };
        assert_eq!(got, want, "{name}: {err}");
        assert!(err.to_string().contains(needle), "{name}: {err}");
        assert!(
            !prefix.exists(),
            "{name}: a failed install must not create the prefix"
        );
    }

    // A non-empty directory that is not a toolchain is never replaced.
    let occupied = work.path().join("occupied");
    std::fs::create_dir_all(&occupied).expect("mkdir");
    std::fs::write(occupied.join("precious.txt"), "keep me").expect("write");
    let mut opts = InstallOptions::new(&occupied);
    opts.python = work.path().join("no-python").into_os_string();
    let (r, _) = run_install(&opts);
    assert!(
        matches!(r, Err(InstallError::PrefixOccupied { .. })),
        "{r:?}"
    );
    assert!(occupied.join("precious.txt").is_file());
}

// ---------------------------------------------------------------------------------------------
// The real toolchain

/// The real tileiras through the normal discovery, or `None` after printing why the test is skipped.
fn real_tileiras(test: &str) -> Option<Tileiras> {
    poison_cuda_env();
    match Tileiras::discover() {
        Ok(t) => Some(t),
        Err(e @ ToolchainError::NotFound { .. }) => {
            cutile_testkit::skip(test, &format!("no tileiras found\n{e}"));
            None
        }
        Err(e) => panic!("a tileiras was found but is unusable: {e}"),
    }
}

#[test]
fn real_compile_for_each_tier_arch() {
    let Some(t) = real_tileiras("real_compile_for_each_tier_arch") else {
        return;
    };
    assert!(t.reads_bytecode_version(cutile::toolchain::TileirasVersion::new(13, 5)));
    for arch in [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120] {
        let cubin = t
            .compile(&MINIMAL_MODULE, &CompileRequest::new(arch))
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(cubin.arch, arch);
        assert_eq!(cubin.elf_sm(), Some(arch.sm()), "{arch}: e_flags arch");
        assert!(
            cubin.bytes.len() > 1000,
            "{arch}: {} bytes",
            cubin.bytes.len()
        );
        assert!(cubin.elapsed > Duration::ZERO && cubin.elapsed < Duration::from_secs(60));
        eprintln!("{arch}: {} bytes in {:?}", cubin.bytes.len(), cubin.elapsed);
    }
}

#[test]
fn real_corrupted_bytecode_is_exit_3_and_reproducible() {
    let Some(t) = real_tileiras("real_corrupted_bytecode_is_exit_3_and_reproducible") else {
        return;
    };
    let mut bc = MINIMAL_MODULE.to_vec();
    bc[14] = 0x7f; // the first section's alignment field
    let err = t
        .compile(&bc, &CompileRequest::new(GpuArch::Sm90))
        .expect_err("corrupt");
    let ToolchainError::InvalidBytecode(f) = &err else {
        panic!("expected InvalidBytecode, got {err}");
    };
    assert_eq!(f.exit, ExitKind::Code(3));
    assert_eq!(
        f.messages.last().map(String::as_str),
        Some("input does not correspond to Tile IR bytecode")
    );
    let kept = f.kept_input.as_deref().expect("kept");
    assert_eq!(std::fs::read(kept).ok(), Some(bc));
    // The reproduction command, run by a shell with the poisoned environment, fails the same way.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&f.reproduce)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run sh");
    assert_eq!(status.code(), Some(3), "{}", f.reproduce);
}

#[test]
fn real_disassembly() {
    let Some(t) = real_tileiras("real_disassembly") else {
        return;
    };
    let text = t.disassemble(&MINIMAL_MODULE, false).expect("disassemble");
    assert!(
        text.contains("entry @k()") && text.contains("return"),
        "{text}"
    );
    let err = t
        .disassemble(b"\x7fTileIR\0\x0d\x05", false)
        .expect_err("truncated");
    assert_eq!(variant(&err), "InvalidBytecode", "{err}");
}

/// `preview$func extern @ext(%arg0: tile<i32> {access = in})`, 13.5 with the preview flag.
const TILELIB_INTERFACE: [u8; 164] = [
    0x7f, 0x54, 0x69, 0x6c, 0x65, 0x49, 0x52, 0x00, 0x0d, 0x05, 0x01, 0x00, 0x82, 0x10, 0x08, 0xcb,
    0x01, 0x01, 0x03, 0x01, 0x01, 0x06, 0x01, 0x0a, 0x01, 0x00, 0xdf, 0x01, 0x00, 0x00, 0x06, 0x00,
    0x84, 0x08, 0x08, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0x00, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb,
    0x83, 0x21, 0x08, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0x01, 0xcb, 0xcb, 0xcb, 0x00, 0x00, 0x00, 0x00,
    0x01, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0xcb, 0xcb, 0xcb, 0x00, 0x00, 0x00, 0x00, 0x00, 0x85, 0x1d, 0x04, 0x04, 0xcb, 0xcb, 0xcb,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
    0x00, 0x03, 0x0d, 0x01, 0x00, 0x10, 0x01, 0x02, 0x00, 0x81, 0x27, 0x04, 0x02, 0xcb, 0xcb, 0xcb,
    0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x63, 0x75, 0x64, 0x61, 0x5f, 0x74, 0x69, 0x6c,
    0x65, 0x2e, 0x70, 0x72, 0x65, 0x76, 0x69, 0x65, 0x77, 0x24, 0x61, 0x63, 0x63, 0x65, 0x73, 0x73,
    0x65, 0x78, 0x74, 0x00,
];

#[test]
fn real_tile_library_packaging() {
    let Some(t) = real_tileiras("real_tile_library_packaging") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let iface = dir.path().join("if.tilebc");
    let imp = dir.path().join("impl.tilebc");
    std::fs::write(&iface, TILELIB_INTERFACE).expect("write");
    std::fs::write(&imp, MINIMAL_MODULE).expect("write");
    let disasm = t
        .disassemble(&TILELIB_INTERFACE, true)
        .expect("preview disassembly");
    assert!(disasm.contains("preview$func extern @ext"), "{disasm}");

    let out = dir.path().join("lib.tilelib");
    t.create_tile_library(&iface, &[&imp], &out)
        .expect("library");
    let lib = std::fs::read(&out).expect("read lib");
    assert_eq!(lib.get(..4), Some(&b"\x7fELF"[..]));
    assert!(
        lib.windows(TILELIB_INTERFACE.len())
            .any(|w| w == TILELIB_INTERFACE),
        "interface section"
    );

    let refused = dir.path().join("refused.tilelib");
    let none: [&Path; 0] = [];
    let err = t
        .create_tile_library(&iface, &none, &refused)
        .expect_err("interface-only");
    let ToolchainError::TileLibraryRefused(f) = &err else {
        panic!("expected TileLibraryRefused, got {err}");
    };
    assert!(
        f.messages
            .iter()
            .any(|m| m.contains("interface-only tile libraries are not allowed")),
        "{err}"
    );
    assert!(!refused.exists());
}
