//! What an implementation file is, sniffed from its first bytes (the container stores no metadata, so tileiras
//! must do the same): Tile IR bytecode, cubin, fatbin, LTOIR, an implementation-provider shared library, or
//! unknown. Classification never fails; a file that matches no magic is [`FileKind::Unknown`] with a reason.

use object::LittleEndian;
use object::elf;
use object::read::elf::FileHeader as _;
use serde::Serialize;
use std::fmt;

/// `"\x7fTileIR\0"`, the Tile IR bytecode magic.
pub const TILEIR_MAGIC: &[u8; 8] = &cutile_ir::bytecode::MAGIC;
/// Fatbinary magic 0xBA55ED50, stored little-endian.
pub const FATBIN_MAGIC: [u8; 4] = [0x50, 0xED, 0x55, 0xBA];
/// LTOIR magic 0x7F4E43ED, stored little-endian (`ED 43 4E 7F`); found in the output of
/// `nvcc -dlto --ltoir` 13.5 for sm_90 and sm_100.
pub const LTOIR_MAGIC: [u8; 4] = [0xED, 0x43, 0x4E, 0x7F];
const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
/// OSABI byte of CUDA ELF files (cubins).
const ELFOSABI_CUDA: u8 = 0x41;

/// The kind of one file inside (or destined for) a tile library.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileKind {
    /// Tile IR bytecode; version and preview flag from its 12-byte header.
    TileIrBytecode {
        major: u8,
        minor: u8,
        preview: bool,
        /// Header tag bits other than the preview flag (tileiras rejects any).
        #[serde(skip_serializing_if = "is_zero")]
        unknown_tag_bits: u16,
    },
    /// A CUDA ELF (EM_CUDA); `sm` is the SM number from `e_flags` (90 for sm_90 and sm_90a alike).
    Cubin { sm: Option<u32> },
    /// A CUDA fatbinary.
    Fatbin,
    /// Link-time-optimisation IR from `nvcc -dlto --ltoir`.
    Ltoir,
    /// An ELF shared library: an implementation provider (`machine` is the ELF machine name).
    ProviderLibrary { machine: String },
    /// Anything else.
    Unknown { reason: String },
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

impl FileKind {
    /// Pre-compiled code a static library pairs with its implementation bytecode.
    pub fn is_precompiled(&self) -> bool {
        matches!(
            self,
            FileKind::Cubin { .. } | FileKind::Fatbin | FileKind::Ltoir
        )
    }
    pub fn is_bytecode(&self) -> bool {
        matches!(self, FileKind::TileIrBytecode { .. })
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileKind::TileIrBytecode {
                major,
                minor,
                preview,
                unknown_tag_bits,
            } => {
                write!(f, "Tile IR bytecode {major}.{minor}")?;
                if *preview {
                    f.write_str(" (preview)")?;
                }
                if *unknown_tag_bits != 0 {
                    write!(f, " (unknown header tag bits {unknown_tag_bits:#x})")?;
                }
                Ok(())
            }
            FileKind::Cubin { sm: Some(sm) } => write!(f, "cubin sm_{sm}"),
            FileKind::Cubin { sm: None } => f.write_str("cubin (architecture unknown)"),
            FileKind::Fatbin => f.write_str("fatbin"),
            FileKind::Ltoir => f.write_str("LTOIR"),
            FileKind::ProviderLibrary { machine } => {
                write!(f, "implementation-provider shared library ({machine})")
            }
            FileKind::Unknown { reason } => write!(f, "unknown ({reason})"),
        }
    }
}

/// Classify a file by its magic.
pub fn classify(data: &[u8]) -> FileKind {
    if let Some(header) = data.strip_prefix(TILEIR_MAGIC.as_slice()) {
        return match header {
            [major, minor, t0, t1, ..] => {
                let tag = u16::from_le_bytes([*t0, *t1]);
                FileKind::TileIrBytecode {
                    major: *major,
                    minor: *minor,
                    preview: tag & 1 == 1,
                    unknown_tag_bits: tag & !1,
                }
            }
            _ => unknown("Tile IR magic but the 12-byte header is truncated"),
        };
    }
    if data.starts_with(&FATBIN_MAGIC) {
        return FileKind::Fatbin;
    }
    if data.starts_with(&LTOIR_MAGIC) {
        return FileKind::Ltoir;
    }
    if data.starts_with(&ELF_MAGIC) {
        return classify_elf(data);
    }
    unknown("no known magic number")
}

fn unknown(reason: &str) -> FileKind {
    FileKind::Unknown {
        reason: reason.to_string(),
    }
}

fn classify_elf(data: &[u8]) -> FileKind {
    if data.get(4) != Some(&elf::ELFCLASS64.0) || data.get(5) != Some(&elf::ELFDATA2LSB.0) {
        return unknown("ELF file that is not 64-bit little-endian");
    }
    let Ok(header) = elf::FileHeader64::<LittleEndian>::parse(data) else {
        return unknown("truncated or malformed ELF header");
    };
    let e = LittleEndian;
    let machine = header.e_machine(e);
    let e_type = header.e_type(e);
    if machine == elf::EM_CUDA {
        let flags = header.e_flags(e).0;
        let ident = header.e_ident();
        // CUDA ELF ABI version 8 (CUDA 12.8+) moved the SM number to bits 8..16; older ones keep it in 0..8.
        let sm = if ident.os_abi.0 == ELFOSABI_CUDA && ident.abi_version >= 8 {
            (flags >> 8) & 0xff
        } else {
            flags & 0xff
        };
        return FileKind::Cubin {
            sm: (sm != 0).then_some(sm),
        };
    }
    if e_type == elf::ET_DYN {
        return FileKind::ProviderLibrary {
            machine: machine_name(machine),
        };
    }
    FileKind::Unknown {
        reason: format!(
            "ELF file of type {} for {}, neither a cubin nor a shared library",
            e_type.0,
            machine_name(machine)
        ),
    }
}

fn machine_name(m: elf::Machine) -> String {
    match m {
        elf::EM_X86_64 => "x86-64".to_string(),
        elf::EM_AARCH64 => "aarch64".to_string(),
        elf::EM_CUDA => "CUDA".to_string(),
        other => format!("ELF machine {}", other.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 LE header with the given type, machine, OSABI, ABI version and flags.
    fn elf_header(e_type: u16, machine: u16, osabi: u8, abi: u8, flags: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(&ELF_MAGIC);
        h[4] = 2;
        h[5] = 1;
        h[6] = 1;
        h[7] = osabi;
        h[8] = abi;
        h[16..18].copy_from_slice(&e_type.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h[52..54].copy_from_slice(&64u16.to_le_bytes());
        h
    }

    #[test]
    fn magics() {
        let cases: Vec<(Vec<u8>, FileKind)> = vec![
            (
                b"\x7fTileIR\0\x0d\x05\x01\x00rest".to_vec(),
                FileKind::TileIrBytecode {
                    major: 13,
                    minor: 5,
                    preview: true,
                    unknown_tag_bits: 0,
                },
            ),
            (
                b"\x7fTileIR\0\x0d\x04\x02\x00".to_vec(),
                FileKind::TileIrBytecode {
                    major: 13,
                    minor: 4,
                    preview: false,
                    unknown_tag_bits: 2,
                },
            ),
            (vec![0x50, 0xED, 0x55, 0xBA, 1, 0], FileKind::Fatbin),
            (vec![0xED, 0x43, 0x4E, 0x7F, 1, 0x43], FileKind::Ltoir),
            // sm_90 and sm_100 e_flags observed in tileiras/nvcc 13.5 cubins.
            (
                elf_header(2, 190, 0x41, 8, 0x600_5a04),
                FileKind::Cubin { sm: Some(90) },
            ),
            (
                elf_header(2, 190, 0x41, 8, 0x600_6402),
                FileKind::Cubin { sm: Some(100) },
            ),
            (
                elf_header(2, 190, 0x33, 7, 0x0050_0550),
                FileKind::Cubin { sm: Some(80) },
            ),
            (
                elf_header(3, 62, 0, 0, 0),
                FileKind::ProviderLibrary {
                    machine: "x86-64".into(),
                },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(classify(&bytes), want, "{bytes:02x?}");
        }
    }

    #[test]
    fn unknowns() {
        for bytes in [
            &b""[..],
            b"\x7fTileIR\0\x0d",
            b"hello world",
            &elf_header(1, 62, 0, 0, 0),
            &elf_header(2, 190, 0x41, 8, 0)[..30],
        ] {
            assert!(
                matches!(classify(bytes), FileKind::Unknown { .. }),
                "{bytes:02x?} -> {}",
                classify(bytes)
            );
        }
    }
}
