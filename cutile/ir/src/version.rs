//! Tile IR bytecode versions: which exist, which we read and which we write.

use std::fmt;

/// A bytecode version `major.minor` as carried in the file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u8,
    pub minor: u8,
}

pub const V13_1: Version = Version::new(13, 1);
pub const V13_2: Version = Version::new(13, 2);
pub const V13_3: Version = Version::new(13, 3);
pub const V13_4: Version = Version::new(13, 4);
pub const V13_5: Version = Version::new(13, 5);

impl Version {
    pub const fn new(major: u8, minor: u8) -> Self {
        Version { major, minor }
    }
    /// The newest version: the only one that may carry preview (SIMT) content.
    pub const LATEST: Version = V13_5;
    /// Versions the reader accepts (what tileiras 13.5 reads).
    pub const READABLE: [Version; 5] = [V13_1, V13_2, V13_3, V13_4, V13_5];
    /// Versions the writer produces.
    pub const WRITABLE: [Version; 2] = [V13_4, V13_5];

    pub fn is_readable(self) -> bool {
        Self::READABLE.contains(&self)
    }
    pub fn is_writable(self) -> bool {
        Self::WRITABLE.contains(&self)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl std::str::FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s.split_once('.').ok_or_else(|| {
            format!("bytecode version `{s}` is not of the form MAJOR.MINOR (e.g. 13.5)")
        })?;
        let major = a
            .parse()
            .map_err(|_| format!("bad major version in `{s}`"))?;
        let minor = b
            .parse()
            .map_err(|_| format!("bad minor version in `{s}`"))?;
        Ok(Version { major, minor })
    }
}
