//! The container against tileiras's own output (lib1/lib2.tilelib) and against malformed files.

mod common;

use tilelib_tools::container::{self, ContainerError};
use tilelib_tools::kind::{FileKind, classify};

#[test]
fn samples_round_trip_byte_identical() -> Result<(), Box<dyn std::error::Error>> {
    let interface = common::read("tilelib_interface.tilebc");
    // lib1 = interface bytecode given as the implementation; lib2 = the same plus an sm_90 cubin.
    let cases: [(&str, Vec<FileKind>); 2] = [
        ("lib1.tilelib", vec![common::bytecode_13_5_preview()]),
        (
            "lib2.tilelib",
            vec![
                common::bytecode_13_5_preview(),
                FileKind::Cubin { sm: Some(90) },
            ],
        ),
    ];
    for (name, kinds) in cases {
        let bytes = common::read(name);
        let lib = container::read(&bytes)?;
        assert_eq!(
            lib.interface, interface,
            "{name}: .nvtlifc is the interface file verbatim"
        );
        let got: Vec<FileKind> = lib.implementations.iter().map(|f| classify(f)).collect();
        assert_eq!(got, kinds, "{name}");
        assert!(container::other_sections(&bytes)?.is_empty(), "{name}");
        let written = container::write(&lib)?;
        assert_eq!(
            written, bytes,
            "{name}: write(read(x)) must be byte-identical to tileiras's output"
        );
        assert_eq!(container::read(&written)?, lib);
    }
    Ok(())
}

#[test]
fn fixtures_classify() {
    for (name, want) in [
        ("twice_sm90.ltoir", FileKind::Ltoir),
        ("twice_sm90.fatbin", FileKind::Fatbin),
        ("tilelib_interface.tilebc", common::bytecode_13_5_preview()),
    ] {
        assert_eq!(classify(&common::read(name)), want, "{name}");
    }
}

#[test]
fn extra_sections_are_ignored_but_listed() -> Result<(), Box<dyn std::error::Error>> {
    let ifc = common::read("tilelib_interface.tilebc");
    let bytes =
        common::elf_with_sections(&[(".comment", b"x"), (".nvtlifc", &ifc), (".nvtl.0", b"impl")]);
    let lib = container::read(&bytes)?;
    assert_eq!(lib.interface, ifc);
    assert_eq!(lib.implementations, vec![b"impl".to_vec()]);
    assert_eq!(
        container::other_sections(&bytes)?,
        vec![".comment".to_string()]
    );
    Ok(())
}

#[test]
fn malformed_containers_are_typed_errors() {
    let ifc = common::read("tilelib_interface.tilebc");
    let lib1 = common::read("lib1.tilelib");
    let mut big_endian = lib1.clone();
    big_endian[5] = 2;
    type Case = (&'static str, Vec<u8>, fn(&ContainerError) -> bool);
    let cases: Vec<Case> = vec![
        ("empty file", vec![], |e| {
            matches!(e, ContainerError::NotElf { .. })
        }),
        ("bytecode, not an ELF", ifc.clone(), |e| {
            matches!(e, ContainerError::NotElf { .. })
        }),
        ("cubin", common::sample_cubin(), |e| {
            matches!(e, ContainerError::NotRelocatable { what: "cubin", .. })
        }),
        ("big-endian ELF", big_endian, |e| {
            matches!(e, ContainerError::WrongElfClass { .. })
        }),
        ("truncated header", lib1[..40].to_vec(), |e| {
            matches!(e, ContainerError::Malformed(_))
        }),
        (
            "section table cut off",
            lib1[..lib1.len() - 10].to_vec(),
            |e| matches!(e, ContainerError::Malformed(_)),
        ),
        (
            "ELF without .nvtlifc",
            common::elf_with_sections(&[(".text", b"\xc3")]),
            |e| matches!(e, ContainerError::MissingInterface),
        ),
        (
            "two interfaces",
            common::elf_with_sections(&[(".nvtlifc", &ifc), (".nvtlifc", &ifc)]),
            |e| matches!(e, ContainerError::DuplicateSection(n) if n == ".nvtlifc"),
        ),
        (
            "gap in implementations",
            common::elf_with_sections(&[(".nvtlifc", &ifc), (".nvtl.1", b"x")]),
            |e| {
                matches!(
                    e,
                    ContainerError::MissingImplementation {
                        missing: 0,
                        count: 1
                    }
                )
            },
        ),
        (
            "non-numeric implementation",
            common::elf_with_sections(&[(".nvtlifc", &ifc), (".nvtl.a", b"x")]),
            |e| matches!(e, ContainerError::BadImplementationName { .. }),
        ),
    ];
    for (what, bytes, expected) in cases {
        match container::read(&bytes) {
            Ok(_) => panic!("{what}: read succeeded"),
            Err(e) => {
                assert!(expected(&e), "{what}: unexpected error {e:?}");
                // Messages name a cause and a way forward, never a bare code.
                assert!(e.to_string().len() > 30, "{what}: terse message {e}");
            }
        }
    }
}
