//! The `.tilelib` container: an x86-64 ELF64 relocatable object (ET_REL) with no symbols whose sections carry
//! the library's files verbatim (toolchain.md §4.4):
//!
//! - `.nvtlifc`: the interface bytecode (extern declarations only);
//! - `.nvtl.0`, `.nvtl.1`, …: the implementation files, in the order they were given to tileiras;
//! - `.strtab` (empty) and `.shstrtab`.
//!
//! This module only moves bytes in and out of that layout; what the files are is [`crate::kind`]'s job and what
//! the interface declares is [`crate::interface`]'s. [`write()`] lays the file out the way tileiras does (header,
//! `.strtab`, `.shstrtab`, the payloads unaligned in section order, then the section header table), so a library
//! read from tileiras's output is written back byte for byte.

use object::elf;
use object::read::elf::{FileHeader as _, SectionHeader as _};
use object::write::elf::{FileHeader, SectionHeader, Writer};
use object::{Endianness, LittleEndian};

/// Name of the interface section.
pub const INTERFACE_SECTION: &str = ".nvtlifc";
/// Prefix of the implementation sections (`.nvtl.0`, `.nvtl.1`, …).
pub const IMPLEMENTATION_PREFIX: &str = ".nvtl.";

/// The contents of a `.tilelib`: one interface file and the implementation files, all verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TileLib {
    /// Interface bytecode (the `.nvtlifc` section).
    pub interface: Vec<u8>,
    /// Implementation files in section order (`.nvtl.0` first).
    pub implementations: Vec<Vec<u8>>,
}

/// Why a file could not be read as a `.tilelib` container.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error(
        "not an ELF file (it starts with {found}); a .tilelib is the ELF relocatable written by \
         `tileiras --preview-create-tile-lib` or `tilelib package`"
    )]
    NotElf { found: String },
    #[error(
        "ELF file is not a 64-bit little-endian object ({detail}); .tilelib containers are always ELF64 \
         little-endian"
    )]
    WrongElfClass { detail: String },
    #[error(
        "ELF file has type {e_type} (expected 1, relocatable): this looks like a {what}, not a .tilelib"
    )]
    NotRelocatable { e_type: u16, what: &'static str },
    #[error(
        "malformed ELF file: {0}; the file is truncated or corrupt, re-create it with `tilelib package`"
    )]
    Malformed(#[from] object::read::Error),
    #[error(
        "ELF file has no `{INTERFACE_SECTION}` section, so it is not a tile library (a plain object file or \
         cubin?); package one with `tilelib package --interface IF --impl F … -o OUT`"
    )]
    MissingInterface,
    #[error("section `{0}` appears more than once; the container is corrupt")]
    DuplicateSection(String),
    #[error(
        "section `{name}` looks like an implementation section but its index is not a decimal number; \
         the container is corrupt"
    )]
    BadImplementationName { name: String },
    #[error(
        "implementation section `{IMPLEMENTATION_PREFIX}{missing}` is missing although {count} \
         implementation section(s) exist; the container is corrupt"
    )]
    MissingImplementation { missing: usize, count: usize },
    #[error("section `{name}` has no file contents (type SHT_NOBITS); the container is corrupt")]
    NoBits { name: String },
}

/// Why a container could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot lay out the ELF file: {0}")]
    Layout(#[from] object::write::Error),
}

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

/// Read a `.tilelib` from its bytes. Sections other than the interface, the implementations and the string
/// tables are ignored; their names are available from [`other_sections`].
pub fn read(data: &[u8]) -> Result<TileLib, ContainerError> {
    let parsed = Parsed::new(data)?;
    let mut interface = None;
    let mut impls: Vec<(usize, &[u8])> = Vec::new();
    for (name, bytes) in parsed.sections()? {
        if name == INTERFACE_SECTION {
            if interface.replace(bytes?).is_some() {
                return Err(ContainerError::DuplicateSection(name));
            }
        } else if let Some(index) = implementation_index(&name)? {
            if impls.iter().any(|(i, _)| *i == index) {
                return Err(ContainerError::DuplicateSection(name));
            }
            impls.push((index, bytes?));
        }
    }
    let interface = interface.ok_or(ContainerError::MissingInterface)?;
    impls.sort_by_key(|(i, _)| *i);
    let count = impls.len();
    if let Some(missing) = impls
        .iter()
        .enumerate()
        .find(|(pos, (i, _))| pos != i)
        .map(|(pos, _)| pos)
    {
        return Err(ContainerError::MissingImplementation { missing, count });
    }
    Ok(TileLib {
        interface: interface.to_vec(),
        implementations: impls.into_iter().map(|(_, b)| b.to_vec()).collect(),
    })
}

/// Names of the sections [`read`] ignores (anything but the null section, `.strtab`, `.shstrtab`, `.nvtlifc`
/// and `.nvtl.N`). tileiras writes none; a non-empty list means another tool produced or edited the file.
pub fn other_sections(data: &[u8]) -> Result<Vec<String>, ContainerError> {
    let parsed = Parsed::new(data)?;
    let mut out = Vec::new();
    for (name, _) in parsed.sections()? {
        let known = name.is_empty()
            || name == ".strtab"
            || name == ".shstrtab"
            || name == INTERFACE_SECTION
            || implementation_index(&name)?.is_some();
        if !known {
            out.push(name);
        }
    }
    Ok(out)
}

/// Write a `.tilelib` laid out as tileiras lays it out.
pub fn write(lib: &TileLib) -> Result<Vec<u8>, WriteError> {
    let impl_names: Vec<String> = (0..lib.implementations.len())
        .map(|i| format!("{IMPLEMENTATION_PREFIX}{i}"))
        .collect();
    let payloads: Vec<&[u8]> = std::iter::once(lib.interface.as_slice())
        .chain(lib.implementations.iter().map(Vec::as_slice))
        .collect();

    let mut out = Vec::new();
    let mut w = Writer::new(Endianness::Little, true, &mut out);
    // Section order as tileiras writes it: null, .strtab, .shstrtab, .nvtlifc, .nvtl.0, …
    w.reserve_file_header();
    w.reserve_null_section_index();
    w.require_strtab();
    w.reserve_strtab_section_index();
    w.reserve_shstrtab_section_index();
    let mut names = vec![w.add_section_name(INTERFACE_SECTION.as_bytes())];
    names.extend(impl_names.iter().map(|n| w.add_section_name(n.as_bytes())));
    for _ in &payloads {
        w.reserve_section_index();
    }
    w.reserve_strtab()?;
    w.reserve_shstrtab()?;
    let offsets: Vec<u64> = payloads
        .iter()
        .map(|p| w.reserve(p.len() as u64, 1))
        .collect();
    w.reserve_section_headers();

    w.write_file_header(&FileHeader {
        os_abi: elf::ELFOSABI_SYSV,
        abi_version: 0,
        e_type: elf::ET_REL,
        e_machine: elf::EM_X86_64,
        e_entry: 0,
        e_flags: elf::FileFlags(0),
    })?;
    w.write_strtab();
    w.write_shstrtab();
    for p in &payloads {
        w.write(p);
    }
    w.write_null_section_header();
    w.write_strtab_section_header();
    w.write_shstrtab_section_header();
    for ((name, offset), p) in names.iter().zip(&offsets).zip(&payloads) {
        w.write_section_header(&SectionHeader {
            sh_name: w.section_name_offset(Some(*name)),
            sh_type: elf::SHT_PROGBITS,
            sh_flags: elf::SectionFlags(0),
            sh_addr: 0,
            sh_offset: *offset,
            sh_size: p.len() as u64,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 1,
            sh_entsize: 0,
        });
    }
    Ok(out)
}

/// `Some(N)` for `.nvtl.N`, `None` for other names, an error for `.nvtl.` followed by a non-number.
fn implementation_index(name: &str) -> Result<Option<usize>, ContainerError> {
    let Some(rest) = name.strip_prefix(IMPLEMENTATION_PREFIX) else {
        return Ok(None);
    };
    // Only canonical decimal numbers: "01" or "+1" would make two names for one index.
    let canonical = !rest.is_empty()
        && rest.bytes().all(|b| b.is_ascii_digit())
        && (rest == "0" || !rest.starts_with('0'));
    match rest.parse::<usize>() {
        Ok(i) if canonical => Ok(Some(i)),
        _ => Err(ContainerError::BadImplementationName {
            name: name.to_string(),
        }),
    }
}

/// A header-checked ELF64 little-endian relocatable.
struct Parsed<'d> {
    data: &'d [u8],
    header: &'d elf::FileHeader64<LittleEndian>,
}

impl<'d> Parsed<'d> {
    fn new(data: &'d [u8]) -> Result<Self, ContainerError> {
        if !data.starts_with(&ELF_MAGIC) {
            let found = data
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            let found = if found.is_empty() {
                "nothing: the file is empty".to_string()
            } else {
                format!("bytes {found}")
            };
            return Err(ContainerError::NotElf { found });
        }
        let (class, data_enc) = (data.get(4).copied(), data.get(5).copied());
        if class != Some(elf::ELFCLASS64.0) || data_enc != Some(elf::ELFDATA2LSB.0) {
            return Err(ContainerError::WrongElfClass {
                detail: format!("EI_CLASS {class:?}, EI_DATA {data_enc:?}"),
            });
        }
        let header = elf::FileHeader64::<LittleEndian>::parse(data)?;
        let e_type = header.e_type(LittleEndian);
        if e_type != elf::ET_REL {
            let what = match e_type {
                elf::ET_EXEC if header.e_machine(LittleEndian) == elf::EM_CUDA => "cubin",
                elf::ET_EXEC => "executable",
                elf::ET_DYN => "shared library",
                _ => "non-relocatable ELF file",
            };
            return Err(ContainerError::NotRelocatable {
                e_type: e_type.0,
                what,
            });
        }
        Ok(Parsed { data, header })
    }

    /// Every section's name and (lazily checked) contents, in section-table order.
    #[allow(clippy::type_complexity)]
    fn sections(&self) -> Result<Vec<(String, Result<&'d [u8], ContainerError>)>, ContainerError> {
        let endian = LittleEndian;
        let table = self.header.sections(endian, self.data)?;
        let mut out = Vec::with_capacity(table.len());
        for section in table.iter() {
            let name = String::from_utf8_lossy(table.section_name(endian, section)?).into_owned();
            let bytes = if section.sh_type(endian) == elf::SHT_NOBITS {
                Err(ContainerError::NoBits { name: name.clone() })
            } else {
                section
                    .data(endian, self.data)
                    .map_err(ContainerError::Malformed)
            };
            out.push((name, bytes));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implementation_names() {
        assert_eq!(implementation_index(".nvtl.0").ok(), Some(Some(0)));
        assert_eq!(implementation_index(".nvtl.12").ok(), Some(Some(12)));
        assert_eq!(implementation_index(".nvtlifc").ok(), Some(None));
        assert_eq!(implementation_index(".text").ok(), Some(None));
        for bad in [".nvtl.", ".nvtl.01", ".nvtl.x", ".nvtl.+1", ".nvtl.1a"] {
            assert!(implementation_index(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn write_then_read_is_identity() -> Result<(), Box<dyn std::error::Error>> {
        for n in 0..4 {
            let lib = TileLib {
                interface: b"\x7fTileIR\0interface".to_vec(),
                implementations: (0..n).map(|i| vec![i as u8; 3 + i]).collect(),
            };
            let bytes = write(&lib)?;
            assert_eq!(read(&bytes)?, lib);
            assert!(other_sections(&bytes)?.is_empty());
        }
        Ok(())
    }
}
