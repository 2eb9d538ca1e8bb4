//! Reading what the runtime needs from a cubin before handing it to the driver.
//!
//! `cuModuleLoadData` takes a bare pointer and trusts the ELF headers for sizes, so a truncated or
//! damaged image could make the driver read past the buffer. [`inspect`] checks every header, section
//! and segment range against the byte slice first, and collects: the target SM (from `e_flags`), the
//! kernels (global function symbols) and each kernel's parameter layout from its `.nv.info.<name>`
//! section (`EIATTR_KPARAM_INFO`), which launches are checked against.

/// Where one parameter sits in a kernel's parameter block (as the cubin records it and as
/// [`KernelArgs`](super::KernelArgs) packs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParamSlot {
    pub offset: usize,
    pub size: usize,
}

/// Why bytes are not a loadable cubin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CubinError {
    #[error(
        "this is Tile IR bytecode, not a cubin: the driver cannot load bytecode; compile it with \
         tileiras first"
    )]
    TileIrBytecode,
    #[error("not a cubin: {reason}")]
    Malformed { reason: String },
}

fn malformed(reason: impl Into<String>) -> CubinError {
    CubinError::Malformed {
        reason: reason.into(),
    }
}

const EM_CUDA: u16 = 190;
/// OSABI of the current CUDA ELF flavour (tileiras 13.x, ABI version 8); it stores the SM in bits 8..16.
const OSABI_CUDA_V2: u8 = 0x41;
const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const STT_FUNC: u8 = 2;
const STB_GLOBAL: u8 = 1;
const EIATTR_PARAM_CBANK: u8 = 0x0a;
const EIATTR_KPARAM_INFO: u8 = 0x17;
const EIFMT_SVAL: u8 = 4;

/// A kernel entry point found in a cubin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubinEntry {
    pub name: String,
    /// Parameter offsets and sizes in ordinal order, when the cubin records them.
    pub params: Option<Vec<ParamSlot>>,
    /// Total size of the parameter block, when recorded.
    pub param_bytes: Option<u32>,
}

/// What [`inspect`] learns from a cubin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubinInfo {
    /// Target SM as `10 * major + minor`, e.g. 90.
    pub sm: u32,
    pub kernels: Vec<CubinEntry>,
}

impl CubinInfo {
    /// The target as a tileiras name, e.g. `"sm_90"`.
    pub fn arch(&self) -> String {
        format!("sm_{}", self.sm)
    }

    pub fn kernel(&self, name: &str) -> Option<&CubinEntry> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

/// Whether a cubin for `sm` runs on a device of compute capability `cc`. sm_90 and newer are compiled to
/// arch-specific `a` targets that run only on that exact capability; older ones run on any later minor
/// revision of the same major.
pub fn runs_on(sm: u32, cc: (u32, u32)) -> bool {
    let (major, minor) = (sm / 10, sm % 10);
    if sm >= 90 {
        cc == (major, minor)
    } else {
        cc.0 == major && cc.1 >= minor
    }
}

/// Little-endian reads that fail instead of panicking.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn slice(&self, offset: u64, len: u64, what: &str) -> Result<&'a [u8], CubinError> {
        let start = usize::try_from(offset).map_err(|_| malformed(format!("{what} offset")))?;
        let len = usize::try_from(len).map_err(|_| malformed(format!("{what} size")))?;
        start
            .checked_add(len)
            .and_then(|end| self.0.get(start..end))
            .ok_or_else(|| {
                malformed(format!(
                    "{what} ({len} bytes at {start}) extends past the end of the {}-byte image",
                    self.0.len()
                ))
            })
    }
    fn u8(&self, at: usize) -> Result<u8, CubinError> {
        Ok(self.slice(at as u64, 1, "field")?[0])
    }
    fn u16(&self, at: usize) -> Result<u16, CubinError> {
        let b = self.slice(at as u64, 2, "field")?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, at: usize) -> Result<u32, CubinError> {
        let b = self.slice(at as u64, 4, "field")?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, at: usize) -> Result<u64, CubinError> {
        let b = self.slice(at as u64, 8, "field")?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

struct Section {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

/// Validates `image` as a CUDA ELF and lists its kernels and their parameter layouts.
pub fn inspect(image: &[u8]) -> Result<CubinInfo, CubinError> {
    if image.starts_with(&cutile_ir::bytecode::MAGIC) {
        return Err(CubinError::TileIrBytecode);
    }
    if !image.starts_with(b"\x7fELF") {
        return Err(malformed("no ELF magic"));
    }
    let b = Bytes(image);
    if b.u8(4)? != 2 || b.u8(5)? != 1 {
        return Err(malformed("not a 64-bit little-endian ELF"));
    }
    let machine = b.u16(18)?;
    if machine != EM_CUDA {
        return Err(malformed(format!(
            "ELF machine {machine} is not EM_CUDA ({EM_CUDA})"
        )));
    }
    let flags = b.u32(48)?;
    let sm = if b.u8(7)? == OSABI_CUDA_V2 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    };

    let (phoff, phentsize, phnum) = (b.u64(32)?, b.u16(54)?, b.u16(56)?);
    let (shoff, shentsize, shnum, shstrndx) = (b.u64(40)?, b.u16(58)?, b.u16(60)?, b.u16(62)?);
    if phnum > 0 {
        if phentsize < 56 {
            return Err(malformed("program header entries are too small"));
        }
        b.slice(
            phoff,
            phentsize as u64 * phnum as u64,
            "program header table",
        )?;
        for i in 0..phnum as u64 {
            let at = (phoff + i * phentsize as u64) as usize;
            b.slice(b.u64(at + 8)?, b.u64(at + 32)?, "segment")?;
        }
    }
    if shentsize < 64 {
        return Err(malformed("section header entries are too small"));
    }
    b.slice(
        shoff,
        shentsize as u64 * shnum as u64,
        "section header table",
    )?;
    let sections = (0..shnum as u64)
        .map(|i| {
            let at = (shoff + i * shentsize as u64) as usize;
            let s = Section {
                name: b.u32(at)?,
                kind: b.u32(at + 4)?,
                offset: b.u64(at + 24)?,
                size: b.u64(at + 32)?,
                link: b.u32(at + 40)?,
                entsize: b.u64(at + 56)?,
            };
            if s.kind != SHT_NOBITS {
                b.slice(s.offset, s.size, "section")?;
            }
            Ok(s)
        })
        .collect::<Result<Vec<_>, CubinError>>()?;

    let shstr = sections
        .get(shstrndx as usize)
        .ok_or_else(|| malformed("section name table index out of range"))?;
    let shstr = b.slice(shstr.offset, shstr.size, "section name table")?;
    let section_name = |s: &Section| c_str_at(shstr, s.name as usize);

    let mut kernels = Vec::new();
    for symtab in sections.iter().filter(|s| s.kind == SHT_SYMTAB) {
        let strtab = sections
            .get(symtab.link as usize)
            .ok_or_else(|| malformed("symbol table links to a missing string table"))?;
        let strtab = b.slice(strtab.offset, strtab.size, "string table")?;
        let data = b.slice(symtab.offset, symtab.size, "symbol table")?;
        let entsize = if symtab.entsize == 0 {
            24
        } else {
            symtab.entsize as usize
        };
        if entsize < 24 {
            return Err(malformed("symbol entries are too small"));
        }
        for sym in data.chunks_exact(entsize) {
            let info = sym[4];
            if info & 0xf != STT_FUNC || info >> 4 != STB_GLOBAL {
                continue;
            }
            let name_at = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]) as usize;
            let name = c_str_at(strtab, name_at)
                .ok_or_else(|| malformed("symbol name out of range"))?
                .to_string();
            let info_name = format!(".nv.info.{name}");
            let (params, param_bytes) = match sections
                .iter()
                .find(|s| section_name(s) == Some(info_name.as_str()))
            {
                Some(s) => parse_nv_info(b.slice(s.offset, s.size, "kernel info")?)?,
                None => (None, None),
            };
            kernels.push(CubinEntry {
                name,
                params,
                param_bytes,
            });
        }
    }
    Ok(CubinInfo { sm, kernels })
}

fn c_str_at(table: &[u8], at: usize) -> Option<&str> {
    let rest = table.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

type ParamInfo = (Option<Vec<ParamSlot>>, Option<u32>);

/// Parses `.nv.info.<kernel>`: a list of (format, attribute, value) records.
fn parse_nv_info(data: &[u8]) -> Result<ParamInfo, CubinError> {
    let mut params: Vec<(u16, ParamSlot)> = Vec::new();
    let mut total = None;
    let mut at = 0usize;
    while at + 4 <= data.len() {
        let (format, attr) = (data[at], data[at + 1]);
        if format != EIFMT_SVAL {
            at += 4;
            continue;
        }
        let len = u16::from_le_bytes([data[at + 2], data[at + 3]]) as usize;
        let payload = data
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| malformed("kernel info record extends past its section"))?;
        match attr {
            EIATTR_KPARAM_INFO if len >= 12 => {
                let ordinal = u16::from_le_bytes([payload[4], payload[5]]);
                let offset = u16::from_le_bytes([payload[6], payload[7]]) as usize;
                let word = u32::from_le_bytes([payload[8], payload[9], payload[10], payload[11]]);
                let size = ((word >> 18) & 0x3fff) as usize;
                params.push((ordinal, ParamSlot { offset, size }));
            }
            EIATTR_PARAM_CBANK if len >= 8 => {
                total = Some(u16::from_le_bytes([payload[6], payload[7]]) as u32);
            }
            _ => {}
        }
        at += 4 + len;
    }
    params.sort_by_key(|&(ordinal, _)| ordinal);
    let slots = (!params.is_empty()).then(|| params.into_iter().map(|(_, s)| s).collect());
    Ok((slots, total))
}
