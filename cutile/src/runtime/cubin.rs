//! Reading what the runtime needs from a cubin before handing it to the driver.
//!
//! `cuModuleLoadData` takes a bare pointer and trusts the ELF headers for sizes, so a truncated or
//! damaged image could make the driver read past the buffer. [`inspect`] checks every header, section
//! and segment range against the byte slice first, and collects: the target SM (from `e_flags`), the
//! kernels (global function symbols), each kernel's parameter layout from its `.nv.info.<name>`
//! section (`EIATTR_KPARAM_INFO`), which launches are checked against, and each kernel's resource usage
//! ([`KernelResources`]: registers and stack frame from the file-wide `.nv.info` section, static shared
//! memory and code size from the kernel's `.nv.shared.<name>` and `.text.<name>` section sizes).
//!
//! `.nv.info` sections are lists of records: a format byte, an attribute byte, then either a 2-byte
//! value (`EIFMT_BVAL`/`EIFMT_HVAL`, and the value-less `EIFMT_NVAL`) or a `u16` length and that many
//! payload bytes (`EIFMT_SVAL`). The file-wide section's register and frame records are `(symbol index,
//! value)` pairs of `u32`s naming the kernel by its index in the symbol table the section links to.

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
/// Per-thread stack frame (local memory) of a function, `(symbol index, bytes)`.
const EIATTR_FRAME_SIZE: u8 = 0x11;
const EIATTR_KPARAM_INFO: u8 = 0x17;
/// Registers per thread of a function, `(symbol index, count)`.
const EIATTR_REGCOUNT: u8 = 0x2f;
const EIFMT_SVAL: u8 = 4;

/// What a kernel takes of an SM, as the cubin records it (what `ptxas -v` prints, less the spill counts,
/// which are not stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KernelResources {
    /// Registers per thread: the kernel's `EIATTR_REGCOUNT` record in `.nv.info`, else bits 24..32 of
    /// its `.text.<name>` section's `sh_info` when those are non-zero (the layout some CUDA toolchains
    /// use; tileiras 13.x cubins leave them zero and record only the attribute). `None` when neither
    /// says.
    pub registers: Option<u32>,
    /// Per-thread stack frame in local memory, in bytes: the kernel's `EIATTR_FRAME_SIZE` record in
    /// `.nv.info` (`ptxas -v`'s "bytes stack frame"; register spills and local arrays live there, so 0
    /// means no spilling). `None` when not recorded.
    pub stack_frame_bytes: Option<u32>,
    /// Static shared memory per block, in bytes: the size of `.nv.shared.<name>`, 0 when the kernel has
    /// none. The driver-reserved `.nv.shared.reserved.*` sections are not counted.
    pub static_shared_bytes: u64,
    /// Machine code size, in bytes: the size of `.text.<name>`; `None` when the section is missing.
    pub code_bytes: Option<u64>,
}

/// A kernel entry point found in a cubin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubinEntry {
    pub name: String,
    /// Parameter offsets and sizes in ordinal order, when the cubin records them.
    pub params: Option<Vec<ParamSlot>>,
    /// Total size of the parameter block, when recorded.
    pub param_bytes: Option<u32>,
    /// What the kernel takes of an SM, for entries [`inspect`] read from a cubin; `None` for an entry
    /// the runtime made for a kernel the cubin does not describe.
    pub resources: Option<KernelResources>,
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

    /// The resource usage of the kernel `name`, if the cubin has that kernel.
    pub fn resources_of(&self, name: &str) -> Option<&KernelResources> {
        self.kernel(name)?.resources.as_ref()
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
    info: u32,
    entsize: u64,
}

/// Validates `image` as a CUDA ELF and lists its kernels, their parameter layouts and their resource
/// usage.
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
                info: b.u32(at + 44)?,
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

    let find = |name: &str| sections.iter().find(|s| section_name(s) == Some(name));

    let mut kernels = Vec::new();
    for (symtab_index, symtab) in sections.iter().enumerate() {
        if symtab.kind != SHT_SYMTAB {
            continue;
        }
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
        // The file-wide attributes that name this table's symbols.
        let mut function_attrs = Vec::new();
        for s in sections
            .iter()
            .filter(|s| s.link as usize == symtab_index && section_name(s) == Some(".nv.info"))
        {
            function_attrs.extend(parse_function_attrs(b.slice(
                s.offset,
                s.size,
                "file-wide kernel info",
            )?)?);
        }
        for (symbol, sym) in data.chunks_exact(entsize).enumerate() {
            let info = sym[4];
            if info & 0xf != STT_FUNC || info >> 4 != STB_GLOBAL {
                continue;
            }
            let name_at = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]) as usize;
            let name = c_str_at(strtab, name_at)
                .ok_or_else(|| malformed("symbol name out of range"))?
                .to_string();
            let (params, param_bytes) = match find(&format!(".nv.info.{name}")) {
                Some(s) => parse_nv_info(b.slice(s.offset, s.size, "kernel info")?)?,
                None => (None, None),
            };
            let attr = |wanted: u8| {
                function_attrs
                    .iter()
                    .rev()
                    .find(|&&(attr, sym, _)| attr == wanted && sym as usize == symbol)
                    .map(|&(_, _, value)| value)
            };
            let text = find(&format!(".text.{name}"));
            let registers = attr(EIATTR_REGCOUNT)
                .or_else(|| text.map(|t| t.info >> 24).filter(|&regs| regs != 0));
            let resources = KernelResources {
                registers,
                stack_frame_bytes: attr(EIATTR_FRAME_SIZE),
                static_shared_bytes: find(&format!(".nv.shared.{name}")).map_or(0, |s| s.size),
                code_bytes: text.map(|t| t.size),
            };
            kernels.push(CubinEntry {
                name,
                params,
                param_bytes,
                resources: Some(resources),
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

/// One `.nv.info` record.
struct Record<'a> {
    format: u8,
    attr: u8,
    /// The `u16` length-prefixed bytes of an `EIFMT_SVAL` record, the 2 value bytes of any other.
    payload: &'a [u8],
}

/// The records of a `.nv.info` section, in order.
fn nv_info_records(data: &[u8]) -> Result<Vec<Record<'_>>, CubinError> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while let Some(header) = data.get(at..at + 4) {
        let (format, attr) = (header[0], header[1]);
        if format != EIFMT_SVAL {
            records.push(Record {
                format,
                attr,
                payload: &header[2..],
            });
            at += 4;
            continue;
        }
        let len = u16::from_le_bytes([header[2], header[3]]) as usize;
        let payload = data
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| malformed("kernel info record extends past its section"))?;
        records.push(Record {
            format,
            attr,
            payload,
        });
        at += 4 + len;
    }
    Ok(records)
}

/// The register count and stack frame records of the file-wide `.nv.info` as (attribute, symbol index,
/// value).
fn parse_function_attrs(data: &[u8]) -> Result<Vec<(u8, u32, u32)>, CubinError> {
    let mut attrs = Vec::new();
    for Record {
        format,
        attr,
        payload,
    } in nv_info_records(data)?
    {
        if format != EIFMT_SVAL || !matches!(attr, EIATTR_REGCOUNT | EIATTR_FRAME_SIZE) {
            continue;
        }
        let p = Bytes(payload);
        let pair = p.u32(0).ok().zip(p.u32(4).ok());
        let (symbol, value) = pair.ok_or_else(|| {
            malformed(format!(
                "a {} record in .nv.info has {} bytes, not a (symbol, value) pair of 8",
                if attr == EIATTR_REGCOUNT {
                    "register count"
                } else {
                    "stack frame"
                },
                payload.len()
            ))
        })?;
        attrs.push((attr, symbol, value));
    }
    Ok(attrs)
}

type ParamInfo = (Option<Vec<ParamSlot>>, Option<u32>);

/// Parses `.nv.info.<kernel>` for the parameter layout (`EIATTR_KPARAM_INFO`) and the parameter block
/// size (`EIATTR_PARAM_CBANK`).
fn parse_nv_info(data: &[u8]) -> Result<ParamInfo, CubinError> {
    let mut params: Vec<(u16, ParamSlot)> = Vec::new();
    let mut total = None;
    for Record {
        format,
        attr,
        payload,
    } in nv_info_records(data)?
    {
        if format != EIFMT_SVAL {
            continue;
        }
        match attr {
            EIATTR_KPARAM_INFO => {
                let p = Bytes(payload);
                let fields = (p.u16(4).ok(), p.u16(6).ok(), p.u32(8).ok());
                if let (Some(ordinal), Some(offset), Some(word)) = fields {
                    let size = ((word >> 18) & 0x3fff) as usize;
                    let offset = offset as usize;
                    params.push((ordinal, ParamSlot { offset, size }));
                }
            }
            EIATTR_PARAM_CBANK => {
                if let Ok(size) = Bytes(payload).u16(6) {
                    total = Some(u32::from(size));
                }
            }
            _ => {}
        }
    }
    params.sort_by_key(|&(ordinal, _)| ordinal);
    let slots = (!params.is_empty()).then(|| params.into_iter().map(|(_, s)| s).collect());
    Ok((slots, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VADD_SM90: &[u8] = include_bytes!("../../tests/runtime_fixtures/vadd_f32_sm90.cubin");
    const VADD_SM100: &[u8] = include_bytes!("../../tests/runtime_fixtures/vadd_f32_sm100.cubin");

    /// One section of a [`elf`] image: name, type, contents (or the size of a `SHT_NOBITS` one), link
    /// and info.
    struct Sec {
        name: &'static str,
        kind: u32,
        data: Vec<u8>,
        nobits_size: u64,
        link: u32,
        info: u32,
    }

    fn sec(name: &'static str, kind: u32, data: Vec<u8>) -> Sec {
        Sec {
            name,
            kind,
            data,
            nobits_size: 0,
            link: 0,
            info: 0,
        }
    }

    /// An sm_90 CUDA ELF with a null section, `.shstrtab` (index 1) and `sections` from index 2 on.
    fn elf(sections: Vec<Sec>) -> Vec<u8> {
        let mut shstrtab = vec![0u8];
        let mut names = vec![0u32];
        let mut all = vec![sec("", 0, Vec::new()), sec(".shstrtab", 3, Vec::new())];
        all.extend(sections);
        for s in all.iter().skip(1) {
            names.push(shstrtab.len() as u32);
            shstrtab.extend_from_slice(s.name.as_bytes());
            shstrtab.push(0);
        }
        all[1].data = shstrtab;
        let mut out = vec![0u8; 64];
        out[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x41");
        out[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        out[48..52].copy_from_slice(&(90u32 << 8).to_le_bytes());
        let mut placed = Vec::new();
        for s in &all {
            placed.push(out.len() as u64);
            out.extend_from_slice(&s.data);
        }
        let shoff = out.len() as u64;
        for ((s, offset), name) in all.iter().zip(placed).zip(names) {
            let size = if s.kind == SHT_NOBITS {
                s.nobits_size
            } else {
                s.data.len() as u64
            };
            let entsize: u64 = if s.kind == SHT_SYMTAB { 24 } else { 0 };
            let mut h = Vec::with_capacity(64);
            h.extend_from_slice(&name.to_le_bytes());
            h.extend_from_slice(&s.kind.to_le_bytes());
            h.extend_from_slice(&[0; 16]); // flags, addr
            h.extend_from_slice(&offset.to_le_bytes());
            h.extend_from_slice(&size.to_le_bytes());
            h.extend_from_slice(&s.link.to_le_bytes());
            h.extend_from_slice(&s.info.to_le_bytes());
            h.extend_from_slice(&[0; 8]); // addralign
            h.extend_from_slice(&entsize.to_le_bytes());
            out.extend_from_slice(&h);
        }
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&(all.len() as u16).to_le_bytes());
        out[62..64].copy_from_slice(&1u16.to_le_bytes());
        out
    }

    /// An `EIFMT_SVAL` record.
    fn sval(attr: u8, payload: &[u8]) -> Vec<u8> {
        let mut r = vec![EIFMT_SVAL, attr];
        r.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        r.extend_from_slice(payload);
        r
    }

    /// A `(symbol, value)` record of the file-wide `.nv.info`.
    fn function_attr(attr: u8, symbol: u32, value: u32) -> Vec<u8> {
        let mut payload = symbol.to_le_bytes().to_vec();
        payload.extend_from_slice(&value.to_le_bytes());
        sval(attr, &payload)
    }

    /// Two kernels, `a` (symbol 1) and `b` (symbol 2): `a` has register and frame records, static shared
    /// memory and a driver-reserved shared section beside it; `b` has its register count only in its
    /// `.text` section's `sh_info`. `info` is the file-wide `.nv.info`'s contents.
    fn two_kernels(info: Vec<u8>) -> Vec<u8> {
        let strtab = b"\0a\0b\0".to_vec();
        let mut symtab = vec![0u8; 24];
        for name_at in [1u32, 3] {
            let mut sym = vec![0u8; 24];
            sym[..4].copy_from_slice(&name_at.to_le_bytes());
            sym[4] = (STB_GLOBAL << 4) | STT_FUNC;
            symtab.extend_from_slice(&sym);
        }
        // Sections: 2 .strtab, 3 .symtab, 4 .nv.info, 5 .text.a, 6 .text.b, 7/8 shared.
        let mut symtab = sec(".symtab", SHT_SYMTAB, symtab);
        symtab.link = 2;
        let mut nv_info = sec(".nv.info", 0x7000_0000, info);
        nv_info.link = 3;
        let mut text_a = sec(".text.a", 1, vec![0; 256]);
        text_a.info = 1;
        let mut text_b = sec(".text.b", 1, vec![0; 128]);
        text_b.info = (72 << 24) | 2;
        let mut shared_a = sec(".nv.shared.a", SHT_NOBITS, Vec::new());
        shared_a.nobits_size = 4096;
        let mut reserved = sec(".nv.shared.reserved.0", SHT_NOBITS, Vec::new());
        reserved.nobits_size = 64;
        elf(vec![
            sec(".strtab", 3, strtab),
            symtab,
            nv_info,
            text_a,
            text_b,
            shared_a,
            reserved,
        ])
    }

    fn attrs_of_a() -> Vec<u8> {
        [
            function_attr(EIATTR_REGCOUNT, 1, 40),
            function_attr(EIATTR_FRAME_SIZE, 1, 16),
            // A half-word record between them, as tileiras writes some.
            vec![3, 0x1b, 0xff, 0],
        ]
        .concat()
    }

    #[test]
    fn resources_of_the_fixture_cubins() {
        // What `ptxas -v` reported for cuTile's vadd: 34 / 26 registers, no stack frame, no static
        // shared memory (sm_100's 64 reserved bytes are the driver's, not the kernel's).
        for (bytes, registers, code) in [(VADD_SM90, 34, 6528), (VADD_SM100, 26, 4352)] {
            let info = inspect(bytes).expect("fixture parses");
            assert!(info.kernels.iter().all(|k| k.resources.is_some()));
            let name = &info.kernels[0].name;
            assert_eq!(
                info.resources_of(name),
                Some(&KernelResources {
                    registers: Some(registers),
                    stack_frame_bytes: Some(0),
                    static_shared_bytes: 0,
                    code_bytes: Some(code),
                }),
                "{name}"
            );
            assert_eq!(info.resources_of("no_such_kernel"), None);
        }
    }

    #[test]
    fn resources_per_kernel_from_attributes_sections_and_sh_info() {
        let info = inspect(&two_kernels(attrs_of_a())).expect("synthetic cubin parses");
        assert_eq!(info.sm, 90);
        let names: Vec<&str> = info.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            info.resources_of("a"),
            Some(&KernelResources {
                registers: Some(40),
                stack_frame_bytes: Some(16),
                static_shared_bytes: 4096,
                code_bytes: Some(256),
            })
        );
        assert_eq!(
            info.resources_of("b"),
            Some(&KernelResources {
                registers: Some(72),
                stack_frame_bytes: None,
                static_shared_bytes: 0,
                code_bytes: Some(128),
            })
        );
    }

    #[test]
    fn the_attribute_wins_over_sh_info() {
        let info = [attrs_of_a(), function_attr(EIATTR_REGCOUNT, 2, 64)].concat();
        let info = inspect(&two_kernels(info)).expect("parses");
        assert_eq!(info.resources_of("b").and_then(|r| r.registers), Some(64));
    }

    #[test]
    fn malformed_kernel_attributes_are_errors() {
        let short_regcount = [attrs_of_a(), sval(EIATTR_REGCOUNT, &[2, 0, 0, 0])].concat();
        let mut past_the_end = attrs_of_a();
        past_the_end.extend_from_slice(&[EIFMT_SVAL, EIATTR_FRAME_SIZE, 8, 0, 1, 0, 0, 0]);
        for (info, needle) in [
            (short_regcount, "register count record"),
            (past_the_end, "extends past its section"),
        ] {
            let err = inspect(&two_kernels(info)).expect_err(needle);
            assert!(matches!(err, CubinError::Malformed { .. }), "{err:?}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn a_damaged_fixture_info_section_is_an_error() {
        // The fixture's file-wide `.nv.info` starts with its register count record; claim it is longer
        // than the section.
        let at = VADD_SM90
            .windows(4)
            .position(|w| w == [EIFMT_SVAL, EIATTR_REGCOUNT, 8, 0])
            .expect("the fixture has a register count record");
        let mut bytes = VADD_SM90.to_vec();
        bytes[at + 2..at + 4].copy_from_slice(&0xfff0u16.to_le_bytes());
        let err = inspect(&bytes).expect_err("a record past its section");
        assert!(err.to_string().contains("past its section"), "{err}");
    }

    #[test]
    fn truncated_synthetic_cubins_are_errors() {
        let bytes = two_kernels(attrs_of_a());
        // The section header table ends the file, so every shorter prefix is invalid.
        for len in 0..bytes.len() {
            assert!(inspect(&bytes[..len]).is_err(), "prefix of {len} bytes");
        }
    }
}
