//! Target descriptions: the GPU architectures tileiras 13.5 compiles for, and the host ISA the cubin's
//! embedded host callbacks are built for.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A GPU architecture accepted by `tileiras --gpu-name` (toolchain.md §5.2).
///
/// sm_90 and newer compile to the arch-specific `a` targets (sm_90a, sm_100a, ...): such a cubin runs
/// only on exactly that compute capability, so compile once per exact SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuArch {
    Sm80,
    Sm86,
    Sm87,
    Sm88,
    Sm89,
    Sm90,
    Sm100,
    Sm103,
    Sm107,
    Sm110,
    Sm120,
    Sm121,
}

/// The text did not name a supported GPU architecture.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "unsupported GPU architecture '{requested}': tileiras 13.5 supports {}",
    list_archs(GpuArch::ALL.iter().copied())
)]
pub struct UnsupportedArch {
    /// What was asked for, verbatim.
    pub requested: String,
}

pub(crate) fn list_archs(archs: impl Iterator<Item = GpuArch>) -> String {
    archs.map(|a| a.name()).collect::<Vec<_>>().join(", ")
}

impl GpuArch {
    /// Every architecture in the table, oldest first.
    pub const ALL: [GpuArch; 12] = [
        GpuArch::Sm80,
        GpuArch::Sm86,
        GpuArch::Sm87,
        GpuArch::Sm88,
        GpuArch::Sm89,
        GpuArch::Sm90,
        GpuArch::Sm100,
        GpuArch::Sm103,
        GpuArch::Sm107,
        GpuArch::Sm110,
        GpuArch::Sm120,
        GpuArch::Sm121,
    ];

    /// The SM number, e.g. 90 for sm_90.
    pub const fn sm(self) -> u32 {
        match self {
            GpuArch::Sm80 => 80,
            GpuArch::Sm86 => 86,
            GpuArch::Sm87 => 87,
            GpuArch::Sm88 => 88,
            GpuArch::Sm89 => 89,
            GpuArch::Sm90 => 90,
            GpuArch::Sm100 => 100,
            GpuArch::Sm103 => 103,
            GpuArch::Sm107 => 107,
            GpuArch::Sm110 => 110,
            GpuArch::Sm120 => 120,
            GpuArch::Sm121 => 121,
        }
    }

    /// The architecture with this SM number, if supported.
    pub fn from_sm(sm: u32) -> Option<GpuArch> {
        GpuArch::ALL.into_iter().find(|a| a.sm() == sm)
    }

    /// The architecture for a device's compute capability (major, minor), if supported.
    pub fn from_compute_capability(major: u32, minor: u32) -> Option<GpuArch> {
        if minor > 9 {
            return None;
        }
        GpuArch::from_sm(major.checked_mul(10)?.checked_add(minor)?)
    }

    /// Compute capability (major, minor), e.g. (9, 0) for sm_90.
    pub const fn compute_capability(self) -> (u32, u32) {
        (self.sm() / 10, self.sm() % 10)
    }

    /// The `--gpu-name` value, e.g. `sm_90`.
    pub const fn name(self) -> &'static str {
        match self {
            GpuArch::Sm80 => "sm_80",
            GpuArch::Sm86 => "sm_86",
            GpuArch::Sm87 => "sm_87",
            GpuArch::Sm88 => "sm_88",
            GpuArch::Sm89 => "sm_89",
            GpuArch::Sm90 => "sm_90",
            GpuArch::Sm100 => "sm_100",
            GpuArch::Sm103 => "sm_103",
            GpuArch::Sm107 => "sm_107",
            GpuArch::Sm110 => "sm_110",
            GpuArch::Sm120 => "sm_120",
            GpuArch::Sm121 => "sm_121",
        }
    }

    /// Whether tileiras targets the arch-specific `a` variant (sm_90 and newer). Such cubins load
    /// only on a device of exactly this compute capability.
    pub const fn is_arch_specific(self) -> bool {
        self.sm() >= 90
    }

    /// Whether the arch has thread-block clusters (sm_90 and newer), which the `num_cta_in_cga`
    /// hint asks for (`Kernel::with_cluster`); sm_80 has none and tileiras drops the hint there.
    pub const fn has_clusters(self) -> bool {
        self.sm() >= 90
    }

    /// The ptxas target the cubin is built for: `sm_90a` for arch-specific ones, else `sm_80`.
    pub fn target_name(self) -> String {
        if self.is_arch_specific() {
            format!("{}a", self.name())
        } else {
            self.name().to_owned()
        }
    }

    /// Whether a cubin built for `self` loads on a device of compute capability (major, minor).
    /// Arch-specific targets need the exact CC; sm_8x cubins run on the same major at an equal or
    /// higher minor (plain SASS compatibility within a major).
    pub fn runs_on(self, major: u32, minor: u32) -> bool {
        let (m, n) = self.compute_capability();
        if self.is_arch_specific() {
            (m, n) == (major, minor)
        } else {
            m == major && n <= minor
        }
    }
}

impl fmt::Display for GpuArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuArch {
    type Err = UnsupportedArch;

    /// Accepts `sm_90`, `sm90`, `sm_90a` (for arch-specific targets), `90` and `9.0`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnsupportedArch {
            requested: s.to_owned(),
        };
        let t = s.trim().to_ascii_lowercase();
        if let Some((major, minor)) = t.split_once('.') {
            let major = major.parse().map_err(|_| err())?;
            let minor = minor.parse().map_err(|_| err())?;
            return GpuArch::from_compute_capability(major, minor).ok_or_else(err);
        }
        let digits = t
            .strip_prefix("sm_")
            .or_else(|| t.strip_prefix("sm"))
            .unwrap_or(&t);
        let (digits, a_suffix) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let arch = digits
            .parse()
            .ok()
            .and_then(GpuArch::from_sm)
            .ok_or_else(err)?;
        if a_suffix && !arch.is_arch_specific() {
            return Err(err());
        }
        Ok(arch)
    }
}

impl serde::Serialize for GpuArch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for GpuArch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The host ISA of the cubin's embedded host callbacks (`--host-arch`). The driver runs them on the
/// host at load and launch time, so a cubin for a Grace (GH200/GB200) host needs `Aarch64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum HostArch {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl HostArch {
    /// The ISA of the machine running this code (x86_64 for anything that is not aarch64).
    pub const fn native() -> HostArch {
        if cfg!(target_arch = "aarch64") {
            HostArch::Aarch64
        } else {
            HostArch::X86_64
        }
    }

    /// The `--host-arch` value.
    pub const fn name(self) -> &'static str {
        match self {
            HostArch::X86_64 => "x86_64",
            HostArch::Aarch64 => "aarch64",
        }
    }
}

impl Default for HostArch {
    fn default() -> Self {
        HostArch::native()
    }
}

impl fmt::Display for HostArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HostArch {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "x86_64" | "x86-64" | "amd64" => Ok(HostArch::X86_64),
            "aarch64" | "arm64" => Ok(HostArch::Aarch64),
            other => Err(format!(
                "unsupported host architecture '{other}': tileiras supports x86_64 and aarch64"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        let cases: &[(&str, Option<GpuArch>)] = &[
            ("sm_90", Some(GpuArch::Sm90)),
            ("90", Some(GpuArch::Sm90)),
            ("9.0", Some(GpuArch::Sm90)),
            ("SM_90a", Some(GpuArch::Sm90)),
            ("sm100", Some(GpuArch::Sm100)),
            ("12.1", Some(GpuArch::Sm121)),
            ("sm_80", Some(GpuArch::Sm80)),
            ("sm_80a", None),
            ("sm_75", None),
            ("7.5", None),
            ("8.10", None),
            ("sm_", None),
            ("", None),
            ("sm_9x", None),
            ("compute_90", None),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<GpuArch>().ok(), *want, "{text}");
        }
    }

    #[test]
    fn round_trips_and_properties() {
        for arch in GpuArch::ALL {
            assert_eq!(arch.name().parse::<GpuArch>(), Ok(arch));
            let (ma, mi) = arch.compute_capability();
            assert_eq!(GpuArch::from_compute_capability(ma, mi), Some(arch));
            assert_eq!(arch.is_arch_specific(), arch.sm() >= 90);
            assert!(arch.runs_on(ma, mi));
        }
        assert_eq!(GpuArch::Sm100.target_name(), "sm_100a");
        assert_eq!(GpuArch::Sm86.target_name(), "sm_86");
        assert!(!GpuArch::Sm100.runs_on(10, 3));
        assert!(GpuArch::Sm80.runs_on(8, 6));
        assert!(!GpuArch::Sm86.runs_on(8, 0));
    }

    #[test]
    fn unsupported_lists_supported() {
        let msg = match "sm_75".parse::<GpuArch>() {
            Err(e) => e.to_string(),
            Ok(a) => panic!("sm_75 parsed as {a}"),
        };
        assert!(msg.contains("'sm_75'"), "{msg}");
        assert!(msg.contains("sm_80, sm_86, sm_87, sm_88, sm_89, sm_90, sm_100, sm_103, sm_107, sm_110, sm_120, sm_121"), "{msg}");
    }

    #[test]
    fn serde_uses_names() {
        let json = serde_json::to_string(&GpuArch::Sm90).ok();
        assert_eq!(json.as_deref(), Some("\"sm_90\""));
        let back: Result<GpuArch, _> = serde_json::from_str("\"sm_120\"");
        assert_eq!(back.ok(), Some(GpuArch::Sm120));
        assert!(serde_json::from_str::<GpuArch>("\"sm_75\"").is_err());
    }
}
