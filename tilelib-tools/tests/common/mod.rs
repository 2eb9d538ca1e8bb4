//! Helpers shared by the integration tests: test data, the tileiras lookup, ELF builders.
#![allow(dead_code)]

use std::path::PathBuf;
use tilelib_tools::kind::FileKind;

/// A file of `tests/data` (copies of the shared tileir-samples, plus LTOIR and fatbin made by nvcc 13.5).
pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

pub fn read(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).unwrap_or_else(|e| panic!("test data {name}: {e}"))
}

pub fn bytecode_13_5_preview() -> FileKind {
    FileKind::TileIrBytecode {
        major: 13,
        minor: 5,
        preview: true,
        unknown_tag_bits: 0,
    }
}

/// tileiras, or `None` after printing why the calling test is skipped.
pub fn tileiras(test: &str) -> Option<cutile::toolchain::Tileiras> {
    match cutile::toolchain::Tileiras::discover() {
        Ok(t) => Some(t),
        Err(e) => {
            cutile_testkit::skip(test, &format!("tileiras not available ({e})"));
            None
        }
    }
}

/// The cubin inside lib2.tilelib (made by tileiras 13.5 for sm_90).
pub fn sample_cubin() -> Vec<u8> {
    let lib = tilelib_tools::container::read(&read("lib2.tilelib")).expect("lib2.tilelib reads");
    lib.implementations[1].clone()
}

/// An ELF64 little-endian relocatable (x86-64) with the given PROGBITS sections, laid out like a .tilelib.
pub fn elf_with_sections(sections: &[(&str, &[u8])]) -> Vec<u8> {
    use object::elf;
    use object::write::elf::{FileHeader, SectionHeader, Writer};
    let mut out = Vec::new();
    let mut w = Writer::new(object::Endianness::Little, true, &mut out);
    w.reserve_file_header();
    w.reserve_null_section_index();
    w.require_strtab();
    w.reserve_strtab_section_index();
    w.reserve_shstrtab_section_index();
    let names: Vec<_> = sections
        .iter()
        .map(|(n, _)| w.add_section_name(n.as_bytes()))
        .collect();
    for _ in sections {
        w.reserve_section_index();
    }
    w.reserve_strtab().expect("strtab");
    w.reserve_shstrtab().expect("shstrtab");
    let offsets: Vec<u64> = sections
        .iter()
        .map(|(_, d)| w.reserve(d.len() as u64, 1))
        .collect();
    w.reserve_section_headers();
    w.write_file_header(&FileHeader {
        os_abi: elf::ELFOSABI_SYSV,
        abi_version: 0,
        e_type: elf::ET_REL,
        e_machine: elf::EM_X86_64,
        e_entry: 0,
        e_flags: elf::FileFlags(0),
    })
    .expect("header");
    w.write_strtab();
    w.write_shstrtab();
    for (_, d) in sections {
        w.write(d);
    }
    w.write_null_section_header();
    w.write_strtab_section_header();
    w.write_shstrtab_section_header();
    for ((name, off), (_, d)) in names.iter().zip(&offsets).zip(sections) {
        w.write_section_header(&SectionHeader {
            sh_name: w.section_name_offset(Some(*name)),
            sh_type: elf::SHT_PROGBITS,
            sh_flags: elf::SectionFlags(0),
            sh_addr: 0,
            sh_offset: *off,
            sh_size: d.len() as u64,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 1,
            sh_entsize: 0,
        });
    }
    out
}

/// Compare generated declarations with their committed copy in `cutile/tests/foreign_fixtures/declared/`,
/// which cutile's `dsl_foreign_declared` test compiles and calls from a kernel. With
/// `UPDATE_FOREIGN_FIXTURES=1` the copy is rewritten instead.
pub fn check_declared_fixture(name: &str, source: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cutile/tests/foreign_fixtures/declared")
        .join(format!("{name}.rs"));
    if std::env::var_os("UPDATE_FOREIGN_FIXTURES").is_some() {
        std::fs::write(&path, source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == source,
        "{} is not what `tilelib declare` generates now; regenerate with \
         `UPDATE_FOREIGN_FIXTURES=1 cargo test -p tilelib-tools` and check that cutile's \
         dsl_foreign_declared test still compiles",
        path.display()
    );
}
