//! Version numbers as tileiras prints them (`V13.5.37`, bytecode `13.5`) and parsers for its
//! `--version`, `--list-versions` and `--help` output.

use std::fmt;
use std::str::FromStr;

use super::arch::GpuArch;

/// A dotted version: `13.5.37` (tool) or `13.5` (bytecode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileirasVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: Option<u32>,
}

impl TileirasVersion {
    /// A two-part version, e.g. a bytecode version.
    pub const fn new(major: u32, minor: u32) -> TileirasVersion {
        TileirasVersion {
            major,
            minor,
            patch: None,
        }
    }

    /// Same major.minor (patch ignored).
    pub fn same_release(&self, other: &TileirasVersion) -> bool {
        self.major == other.major && self.minor == other.minor
    }
}

impl fmt::Display for TileirasVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)?;
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

impl FromStr for TileirasVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("'{s}' is not a version like 13.5 or 13.5.37");
        let mut parts = s.trim().split('.');
        let num = |p: Option<&str>| -> Result<u32, String> {
            p.filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse().ok())
                .ok_or_else(bad)
        };
        let major = num(parts.next())?;
        let minor = num(parts.next())?;
        let patch = match parts.next() {
            Some(p) => Some(num(Some(p))?),
            None => None,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(TileirasVersion {
            major,
            minor,
            patch,
        })
    }
}

/// Finds the tool version in `tileiras --version` output: the `V13.5.37` token, falling back to
/// `release 13.5`.
pub(crate) fn parse_tool_version(text: &str) -> Option<TileirasVersion> {
    let tokens = || text.split(|c: char| c.is_whitespace() || c == ',');
    tokens()
        .filter_map(|t| t.strip_prefix('V'))
        .find_map(|t| {
            t.parse::<TileirasVersion>()
                .ok()
                .filter(|v| v.patch.is_some())
        })
        .or_else(|| {
            let mut it = tokens();
            while let Some(t) = it.next() {
                if t == "release" {
                    return it.find(|t| !t.is_empty())?.parse().ok();
                }
            }
            None
        })
}

/// Parses `tileiras --list-versions`: one bytecode version per line.
pub(crate) fn parse_list_versions(text: &str) -> Vec<TileirasVersion> {
    let mut v: Vec<TileirasVersion> = text
        .lines()
        .filter_map(|l| l.trim().parse::<TileirasVersion>().ok())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Extracts the `--gpu-name` choices from `tileiras --help`: the `=sm_XX` lines that follow the
/// `--gpu-name=<value>` option line, up to the next option. Names our table does not know (a newer
/// tileiras) are skipped, since nothing here can target them.
pub(crate) fn parse_help_gpu_names(help: &str) -> Vec<GpuArch> {
    let mut archs = Vec::new();
    let mut in_block = false;
    for line in help.lines() {
        let t = line.trim_start();
        if t.starts_with("--gpu-name") {
            in_block = true;
        } else if in_block {
            match t.strip_prefix('=') {
                Some(choice) => {
                    let name = choice.split_whitespace().next().unwrap_or("");
                    if let Ok(a) = name.parse::<GpuArch>() {
                        archs.push(a);
                    }
                }
                None => break,
            }
        }
    }
    archs.sort();
    archs.dedup();
    archs
}

/// Reads the (major, minor) version from a Tile IR bytecode header, if the magic is there.
pub(crate) fn bytecode_header_version(bytecode: &[u8]) -> Option<TileirasVersion> {
    let header = bytecode.get(..10)?;
    if header[..8] != cutile_ir::bytecode::MAGIC {
        return None;
    }
    Some(TileirasVersion::new(
        u32::from(header[8]),
        u32::from(header[9]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSION_OUT: &str = "tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler\n\
        Copyright (c) 2005-2026 NVIDIA Corporation\n\
        Built on Mon_Oct_12_19:27:40_PDT_2026\n\
        Cuda compilation tools, release 13.5, V13.5.37\n\
        Build local.local.39125733_\n";

    #[test]
    fn tool_version() {
        assert_eq!(
            parse_tool_version(VERSION_OUT),
            Some(TileirasVersion {
                major: 13,
                minor: 5,
                patch: Some(37)
            })
        );
        assert_eq!(
            parse_tool_version("Cuda compilation tools, release 13.4"),
            Some(TileirasVersion::new(13, 4))
        );
        assert_eq!(parse_tool_version("garbage TileirasVersion x"), None);
    }

    #[test]
    fn list_versions() {
        let v = parse_list_versions("13.1\n13.2\n13.3\n13.4\n13.5\n");
        assert_eq!(v.len(), 5);
        assert_eq!(v.first(), Some(&TileirasVersion::new(13, 1)));
        assert_eq!(v.last(), Some(&TileirasVersion::new(13, 5)));
        assert!(parse_list_versions("nothing here\n").is_empty());
    }

    #[test]
    fn version_text() {
        let cases = [
            ("13.5", true),
            ("13.5.37", true),
            ("13", false),
            ("13.x", false),
            ("1.2.3.4", false),
        ];
        for (t, ok) in cases {
            assert_eq!(t.parse::<TileirasVersion>().is_ok(), ok, "{t}");
        }
        assert_eq!(TileirasVersion::new(13, 5).to_string(), "13.5");
    }

    #[test]
    fn help_gpu_names() {
        let help = "  --device-debug  - x\n  --gpu-name=<value>   - Specify name\n    =sm_80  -   SM 80\n    =sm_90  -   SM 90\n    =sm_999 -   SM 999\n    =sm_121 -   SM 121\n  --host-arch=<value> - h\n    =x86_64 - x\n";
        assert_eq!(
            parse_help_gpu_names(help),
            vec![GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm121]
        );
        assert!(parse_help_gpu_names("no options").is_empty());
    }

    #[test]
    fn header_version() {
        let mut bc = b"\x7fTileIR\0\x0d\x04\0\0".to_vec();
        assert_eq!(
            bytecode_header_version(&bc),
            Some(TileirasVersion::new(13, 4))
        );
        bc[1] = b'X';
        assert_eq!(bytecode_header_version(&bc), None);
        assert_eq!(bytecode_header_version(b"\x7fTile"), None);
    }
}
