//! The `tilelib` binary end to end: output formats, files written, exit status and messages on errors.

mod common;

use std::process::{Command, Output};

fn tilelib(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tilelib"))
        .args(args)
        .output()
        .expect("run tilelib")
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn inspect_json_matches_the_library_api() -> Result<(), Box<dyn std::error::Error>> {
    let lib = common::data("lib2.tilelib");
    let o = tilelib(&[os("inspect"), lib.as_os_str(), os("--json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o))?;
    let report = tilelib_tools::inspect::inspect(&common::read("lib2.tilelib"))?;
    assert_eq!(
        json,
        serde_json::from_str::<serde_json::Value>(&report.to_json())?
    );
    assert_eq!(json["implementations"][1]["kind"], "cubin");
    assert_eq!(json["implementations"][1]["sm"], 90);

    let o = tilelib(&[os("inspect"), lib.as_os_str()]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), report.to_string());
    Ok(())
}

#[test]
fn declare_writes_the_module() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("ext.rs");
    let lib = common::data("lib1.tilelib");
    let o = tilelib(&[os("declare"), lib.as_os_str(), os("-o"), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let written = std::fs::read_to_string(&out)?;
    assert!(
        written.contains("#[cutile::foreign(name = \"ext\")]"),
        "{written}"
    );
    let o = tilelib(&[os("declare"), lib.as_os_str()]);
    assert_eq!(stdout(&o), written, "stdout and -o agree");
    Ok(())
}

#[test]
fn errors_exit_nonzero_with_a_message() {
    let cubin_dir = tempfile::tempdir().expect("tempdir");
    let cubin = cubin_dir.path().join("k.cubin");
    std::fs::write(&cubin, common::sample_cubin()).expect("write");
    let interface = common::data("tilelib_interface.tilebc");
    let absent = common::data("absent.tilelib");
    let ltoir = common::data("twice_sm90.ltoir");
    let fatbin = common::data("twice_sm90.fatbin");
    let cases: Vec<(Vec<&std::ffi::OsStr>, &str)> = vec![
        (vec![os("inspect"), ltoir.as_os_str()], "not an ELF file"),
        (vec![os("inspect"), cubin.as_os_str()], "cubin"),
        (vec![os("inspect"), absent.as_os_str()], "cannot read"),
        (vec![os("declare"), fatbin.as_os_str()], "not an ELF file"),
        (
            vec![
                os("package"),
                os("--interface"),
                interface.as_os_str(),
                os("-o"),
                os("/nonexistent/x.tilelib"),
            ],
            "interface-only tile libraries are not allowed",
        ),
        (
            vec![
                os("package"),
                os("--interface"),
                interface.as_os_str(),
                os("--impl"),
                cubin.as_os_str(),
                os("-o"),
                os("x"),
            ],
            "needs the Tile IR bytecode",
        ),
    ];
    for (args, phrase) in cases {
        let o = tilelib(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("error: "),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(stderr(&o).contains(phrase), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn package_with_tileiras() -> Result<(), Box<dyn std::error::Error>> {
    if common::tileiras("package_with_tileiras").is_none() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("lib.tilelib");
    let interface = common::data("tilelib_interface.tilebc");
    let ltoir = common::data("twice_sm90.ltoir");
    let o = tilelib(&[
        os("package"),
        os("--interface"),
        interface.as_os_str(),
        os("--impl"),
        interface.as_os_str(),
        os("--impl"),
        ltoir.as_os_str(),
        os("-o"),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = tilelib_tools::inspect::inspect(&std::fs::read(&out)?)?;
    assert_eq!(report.implementations.len(), 2);
    // --no-check hands tileiras an interface-only library; its refusal comes back explained.
    let o = tilelib(&[
        os("package"),
        os("--no-check"),
        os("--interface"),
        interface.as_os_str(),
        os("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("the library has no implementation"),
        "{}",
        stderr(&o)
    );
    Ok(())
}
