//! Packaged charts (`charts/*.tgz`), unpacked in memory from the source
//! view, as Helm's `loader.LoadArchive` reads them: the first path
//! component (the chart's directory) is dropped. Every archive is hostile
//! input: its compressed and uncompressed sizes, entry count and path
//! depth are capped, and a path escaping the archive, an absolute path or
//! an entry that is not a file or a directory (symbolic or hard link,
//! device, FIFO) is refused, each with an error naming the archive.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Read as _;

use crate::chart::Source;

/// Budgets of packaged subcharts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Bytes of one `.tgz` file. Default [`ArchiveLimits::DEFAULT_COMPRESSED`].
    pub compressed_bytes: u64,
    /// Bytes the files of all archives of one render expand to (nested
    /// archives included). Default [`ArchiveLimits::DEFAULT_UNCOMPRESSED`].
    pub uncompressed_bytes: u64,
    /// Entries of one archive. Default [`ArchiveLimits::DEFAULT_ENTRIES`].
    pub entries: usize,
    /// Components of an entry's path. Default [`ArchiveLimits::DEFAULT_DEPTH`].
    pub depth: usize,
}

impl ArchiveLimits {
    /// Default cap of one archive's file: 16 MiB (Helm's repositories serve
    /// charts of a few hundred KiB).
    pub const DEFAULT_COMPRESSED: u64 = 16 << 20;
    /// Default cap of the unpacked bytes of a render's archives: 32 MiB.
    /// (Helm allows 100 MiB, but the sandbox has 256 MiB of memory and a
    /// chart's files are held more than once; real charts unpack to a few
    /// MiB at most.)
    pub const DEFAULT_UNCOMPRESSED: u64 = 32 << 20;
    /// Default cap of one archive's entries: 10,000.
    pub const DEFAULT_ENTRIES: usize = 10_000;
    /// Default cap of an entry's path components: 32.
    pub const DEFAULT_DEPTH: usize = 32;
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            compressed_bytes: Self::DEFAULT_COMPRESSED,
            uncompressed_bytes: Self::DEFAULT_UNCOMPRESSED,
            entries: Self::DEFAULT_ENTRIES,
            depth: Self::DEFAULT_DEPTH,
        }
    }
}

/// What is wrong with an archive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// The `.tgz` file itself is too big.
    #[error("{archive}: the archive is {size} bytes compressed, more than {limit}")]
    Compressed {
        /// The archive.
        archive: String,
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The archives' files expand beyond the budget (an archive bomb).
    #[error(
        "{archive}: the archive expands to more than {limit} bytes (archives of one chart together)"
    )]
    Uncompressed {
        /// The archive.
        archive: String,
        /// The cap.
        limit: u64,
    },
    /// Too many entries.
    #[error("{archive}: the archive has more than {limit} entries")]
    Entries {
        /// The archive.
        archive: String,
        /// The cap.
        limit: usize,
    },
    /// A path with too many components.
    #[error("{archive}: entry {entry:?} is deeper than {limit} levels")]
    Depth {
        /// The archive.
        archive: String,
        /// The entry's path.
        entry: String,
        /// The cap.
        limit: usize,
    },
    /// An absolute path (`/x`, `C:/x`).
    #[error("{archive}: entry {entry:?}: chart illegally contains absolute paths")]
    Absolute {
        /// The archive.
        archive: String,
        /// The entry's path.
        entry: String,
    },
    /// A path climbing out of the archive (`a/../../x`).
    #[error("{archive}: entry {entry:?}: chart illegally references parent directory")]
    Escape {
        /// The archive.
        archive: String,
        /// The entry's path.
        entry: String,
    },
    /// A link, device or FIFO.
    #[error("{archive}: entry {entry:?} is a {kind}: only files and directories may be packaged")]
    Special {
        /// The archive.
        archive: String,
        /// The entry's path.
        entry: String,
        /// What it is.
        kind: &'static str,
    },
    /// `Chart.yaml` outside the chart's directory.
    #[error("{archive}: chart yaml not in base directory")]
    ChartYamlAtRoot {
        /// The archive.
        archive: String,
    },
    /// Not gzip, not tar, truncated.
    #[error("{archive}: not a gzipped tar archive: {message}")]
    Corrupt {
        /// The archive.
        archive: String,
        /// The decoder's message.
        message: String,
    },
}

impl ArchiveError {
    /// The archive the error is about.
    pub fn archive(&self) -> &str {
        match self {
            ArchiveError::Compressed { archive, .. }
            | ArchiveError::Uncompressed { archive, .. }
            | ArchiveError::Entries { archive, .. }
            | ArchiveError::Depth { archive, .. }
            | ArchiveError::Absolute { archive, .. }
            | ArchiveError::Escape { archive, .. }
            | ArchiveError::Special { archive, .. }
            | ArchiveError::ChartYamlAtRoot { archive }
            | ArchiveError::Corrupt { archive, .. } => archive,
        }
    }
}

/// The bytes left to unpack in one render (shared by nested archives).
#[derive(Debug)]
pub struct Budget {
    limits: ArchiveLimits,
    left: Cell<u64>,
}

impl Budget {
    /// A fresh budget.
    pub fn new(limits: ArchiveLimits) -> Self {
        Budget {
            limits,
            left: Cell::new(limits.uncompressed_bytes),
        }
    }
}

/// An unpacked archive: its files by path (the chart's directory dropped).
#[derive(Debug, Default, Clone)]
pub struct MemSource {
    files: BTreeMap<String, Vec<u8>>,
}

impl Source for MemSource {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| format!("{path}: no such file in the archive"))
    }

    fn list(&self, path: &str) -> Option<Vec<(String, bool)>> {
        let prefix = if path.is_empty() || path == "." {
            String::new()
        } else {
            format!("{path}/")
        };
        let mut out: BTreeMap<String, bool> = BTreeMap::new();
        for key in self.files.keys() {
            let Some(rest) = key.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((dir, _)) => {
                    out.insert(dir.to_owned(), true);
                }
                None => {
                    out.entry(rest.to_owned()).or_insert(false);
                }
            }
        }
        (!out.is_empty()).then(|| out.into_iter().collect())
    }
}

fn kind_name(kind: tar::EntryType) -> Option<&'static str> {
    Some(match kind {
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char => "character device",
        tar::EntryType::Block => "block device",
        tar::EntryType::Fifo => "FIFO",
        tar::EntryType::Continuous => "contiguous file",
        tar::EntryType::GNUSparse => "sparse file",
        _ => return None,
    })
}

/// The path of an entry inside the chart (its first component dropped,
/// cleaned), None for the chart's directory itself.
fn chart_path(
    archive: &str,
    raw: &str,
    limits: &ArchiveLimits,
) -> Result<Option<String>, ArchiveError> {
    let normalized = raw.replace('\\', "/");
    let absolute = normalized.starts_with('/')
        || normalized.as_bytes().get(1) == Some(&b':')
            && normalized.as_bytes()[0].is_ascii_alphabetic();
    if absolute {
        return Err(ArchiveError::Absolute {
            archive: archive.to_owned(),
            entry: raw.to_owned(),
        });
    }
    let parts: Vec<&str> = normalized.split('/').collect();
    if parts.len() > limits.depth {
        return Err(ArchiveError::Depth {
            archive: archive.to_owned(),
            entry: raw.to_owned(),
            limit: limits.depth,
        });
    }
    if parts.len() == 1 && parts[0] == "Chart.yaml" {
        return Err(ArchiveError::ChartYamlAtRoot {
            archive: archive.to_owned(),
        });
    }
    let mut out: Vec<&str> = Vec::new();
    for part in parts.iter().skip(1) {
        match *part {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(ArchiveError::Escape {
                        archive: archive.to_owned(),
                        entry: raw.to_owned(),
                    });
                }
            }
            p => out.push(p),
        }
    }
    // The first component itself may not climb either.
    if parts[0] == ".." {
        return Err(ArchiveError::Escape {
            archive: archive.to_owned(),
            entry: raw.to_owned(),
        });
    }
    Ok((!out.is_empty()).then(|| out.join("/")))
}

/// Unpacks `bytes` (the file `archive`) within `budget`.
pub fn unpack(archive: &str, bytes: &[u8], budget: &Budget) -> Result<MemSource, ArchiveError> {
    let limits = budget.limits;
    let size = bytes.len() as u64;
    if size > limits.compressed_bytes {
        return Err(ArchiveError::Compressed {
            archive: archive.to_owned(),
            size,
            limit: limits.compressed_bytes,
        });
    }
    let corrupt = |e: std::io::Error| ArchiveError::Corrupt {
        archive: archive.to_owned(),
        message: e.to_string(),
    };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut files = BTreeMap::new();
    let mut count = 0usize;
    for entry in tar.entries().map_err(corrupt)? {
        let entry = entry.map_err(corrupt)?;
        count += 1;
        if count > limits.entries {
            return Err(ArchiveError::Entries {
                archive: archive.to_owned(),
                limit: limits.entries,
            });
        }
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        if let Some(kind) = kind_name(kind) {
            return Err(ArchiveError::Special {
                archive: archive.to_owned(),
                entry: raw,
                kind,
            });
        }
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            continue;
        }
        let path = chart_path(archive, &raw, &limits)?;
        if kind == tar::EntryType::Directory {
            continue;
        }
        let Some(path) = path else {
            continue;
        };
        let left = budget.left.get();
        let mut data = Vec::new();
        entry
            .take(left.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(corrupt)?;
        let used = data.len() as u64;
        if used > left {
            budget.left.set(0);
            return Err(ArchiveError::Uncompressed {
                archive: archive.to_owned(),
                limit: limits.uncompressed_bytes,
            });
        }
        budget.left.set(left - used);
        files.insert(path, data);
    }
    Ok(MemSource { files })
}
