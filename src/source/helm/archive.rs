//! Unpacking a chart archive (`.tgz`) safely.
//!
//! A chart archive comes from outside: it may be a gzip bomb, name paths
//! above its root, carry symlinks, hard links or devices, or hold a million
//! empty files. [`unpack`] refuses all of those before anything reaches the
//! disk outside a fresh directory, and every write goes through a `cap-std`
//! [`Dir`] opened on that directory, so nothing can land outside it even if
//! a check were missed.
//!
//! As Helm's loader does, the archive's first path component (the chart's
//! name, `mychart/Chart.yaml`) is stripped: the chart's files land at the
//! root of the destination.

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;

use cap_std::fs::Dir;

use crate::interrupt::Interrupt;

/// Default cap on the compressed archive: 16 MiB (Helm's own loader caps
/// an archive's files at 20 MiB altogether; real charts are a few KiB to
/// a few MiB).
pub const DEFAULT_MAX_COMPRESSED: u64 = 16 << 20;
/// Default cap on the bytes the archive expands to (tar headers included):
/// 64 MiB.
pub const DEFAULT_MAX_UNCOMPRESSED: u64 = 64 << 20;
/// Default cap on the number of entries: 10 000.
pub const DEFAULT_MAX_ENTRIES: usize = 10_000;
/// Default cap on path depth (components below the chart's root): 32.
pub const DEFAULT_MAX_DEPTH: usize = 32;

/// What an archive may hold at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Compressed size. Default: [`DEFAULT_MAX_COMPRESSED`].
    pub compressed: u64,
    /// Uncompressed size. Default: [`DEFAULT_MAX_UNCOMPRESSED`].
    pub uncompressed: u64,
    /// Entries (files and directories). Default: [`DEFAULT_MAX_ENTRIES`].
    pub entries: usize,
    /// Path components. Default: [`DEFAULT_MAX_DEPTH`].
    pub depth: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            compressed: DEFAULT_MAX_COMPRESSED,
            uncompressed: DEFAULT_MAX_UNCOMPRESSED,
            entries: DEFAULT_MAX_ENTRIES,
            depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// An archive was refused or could not be unpacked. Each names the archive
/// (its URL or reference) and, where there is one, the entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The compressed archive is larger than the limit.
    #[error("{archive}: {size} bytes is more than the {limit}-byte limit for a chart archive")]
    TooLarge {
        /// The archive.
        archive: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// It expands to more than the limit (a gzip or tar bomb).
    #[error("{archive}: expands to more than the {limit}-byte limit for an unpacked chart")]
    Expands {
        /// The archive.
        archive: String,
        /// The limit.
        limit: u64,
    },
    /// The render it was unpacked for was given up (its interrupt was
    /// raised); what was unpacked is left to the caller's cleanup.
    #[error("{archive}: unpacking stopped: the render was given up")]
    Interrupted {
        /// The archive.
        archive: String,
    },
    /// It holds more entries than the limit.
    #[error("{archive}: more than {limit} entries")]
    TooManyEntries {
        /// The archive.
        archive: String,
        /// The limit.
        limit: usize,
    },
    /// An entry is nested deeper than the limit.
    #[error("{archive}: {entry}: nested deeper than {limit} directories")]
    TooDeep {
        /// The archive.
        archive: String,
        /// The entry.
        entry: String,
        /// The limit.
        limit: usize,
    },
    /// An entry's path is absolute or climbs above the archive's root.
    #[error("{archive}: {entry}: path escapes the archive")]
    Escape {
        /// The archive.
        archive: String,
        /// The entry.
        entry: String,
    },
    /// An entry is a symlink, hard link, device or FIFO.
    #[error("{archive}: {entry}: {kind} entries are refused in a chart archive")]
    Forbidden {
        /// The archive.
        archive: String,
        /// The entry.
        entry: String,
        /// What it is.
        kind: &'static str,
    },
    /// An entry's path is not UTF-8 or is empty.
    #[error("{archive}: an entry's path is not valid UTF-8 or is empty")]
    BadPath {
        /// The archive.
        archive: String,
    },
    /// Two entries name the same file.
    #[error("{archive}: {entry}: appears twice")]
    Duplicate {
        /// The archive.
        archive: String,
        /// The entry.
        entry: String,
    },
    /// The archive is not a gzip-compressed tar, or is truncated.
    #[error("{archive}: not a valid chart archive (.tgz): {source}")]
    Corrupt {
        /// The archive.
        archive: String,
        /// What the decoder said.
        source: io::Error,
    },
    /// Writing the unpacked chart failed.
    #[error("{archive}: cannot write {entry}: {source}")]
    Write {
        /// The archive.
        archive: String,
        /// The entry.
        entry: String,
        /// Why.
        source: io::Error,
    },
}

/// Counts the bytes read through it and fails once they pass `limit`.
struct Capped<R> {
    inner: R,
    remaining: u64,
    exceeded: Rc<Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        match self.remaining.checked_sub(n as u64) {
            Some(left) => {
                self.remaining = left;
                Ok(n)
            }
            None => {
                self.exceeded.set(true);
                Err(io::Error::other("archive expands past its limit"))
            }
        }
    }
}

/// Unpacks the gzip-compressed tar `bytes` (named `archive` in errors) into
/// `dest`, which should be empty; the archive's top directory is stripped.
/// Blocking: call it off the async workers (through
/// [`interrupt::spawn_blocking`](crate::interrupt::spawn_blocking): it stops
/// before the next entry once the [current](Interrupt::current) interrupt is
/// raised).
pub fn unpack(
    bytes: &[u8],
    archive: &str,
    dest: &Dir,
    limits: &ArchiveLimits,
) -> Result<(), ArchiveError> {
    let name = || archive.to_owned();
    if bytes.len() as u64 > limits.compressed {
        return Err(ArchiveError::TooLarge {
            archive: name(),
            size: bytes.len() as u64,
            limit: limits.compressed,
        });
    }
    let exceeded = Rc::new(Cell::new(false));
    let reader = Capped {
        inner: flate2::read::MultiGzDecoder::new(bytes),
        remaining: limits.uncompressed,
        exceeded: exceeded.clone(),
    };
    let corrupt = |source: io::Error| {
        if exceeded.get() {
            ArchiveError::Expands {
                archive: name(),
                limit: limits.uncompressed,
            }
        } else {
            ArchiveError::Corrupt {
                archive: name(),
                source,
            }
        }
    };
    let mut tar = tar::Archive::new(reader);
    let mut seen = std::collections::HashSet::new();
    let mut count = 0usize;
    let interrupt = Interrupt::current();
    for entry in tar.entries().map_err(corrupt)? {
        if interrupt.is_raised() {
            return Err(ArchiveError::Interrupted { archive: name() });
        }
        let mut entry = entry.map_err(corrupt)?;
        let kind = entry.header().entry_type();
        if matches!(kind, tar::EntryType::XGlobalHeader) {
            continue;
        }
        count += 1;
        if count > limits.entries {
            return Err(ArchiveError::TooManyEntries {
                archive: name(),
                limit: limits.entries,
            });
        }
        let raw = entry.path_bytes().into_owned();
        let text =
            std::str::from_utf8(&raw).map_err(|_| ArchiveError::BadPath { archive: name() })?;
        let entry_name = text.to_owned();
        let forbidden = |kind| ArchiveError::Forbidden {
            archive: name(),
            entry: entry_name.clone(),
            kind,
        };
        let is_dir = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => false,
            tar::EntryType::Directory => true,
            tar::EntryType::Symlink => return Err(forbidden("symlink")),
            tar::EntryType::Link => return Err(forbidden("hard link")),
            tar::EntryType::Char | tar::EntryType::Block => return Err(forbidden("device")),
            tar::EntryType::Fifo => return Err(forbidden("FIFO")),
            _ => return Err(forbidden("special")),
        };
        let Some(relative) = relative_path(text, archive, limits.depth)? else {
            continue;
        };
        let write = |source| ArchiveError::Write {
            archive: name(),
            entry: entry_name.clone(),
            source,
        };
        if is_dir {
            dest.create_dir_all(&relative).map_err(write)?;
            continue;
        }
        if !seen.insert(relative.clone()) {
            return Err(ArchiveError::Duplicate {
                archive: name(),
                entry: entry_name,
            });
        }
        if let Some((parent, _)) = relative.rsplit_once('/') {
            dest.create_dir_all(parent).map_err(write)?;
        }
        let mut content = Vec::new();
        entry.read_to_end(&mut content).map_err(corrupt)?;
        dest.write(&relative, &content).map_err(write)?;
    }
    Ok(())
}

/// The entry's path below the archive's top directory, checked: `None` for
/// the top directory itself.
fn relative_path(
    text: &str,
    archive: &str,
    max_depth: usize,
) -> Result<Option<String>, ArchiveError> {
    let escape = || ArchiveError::Escape {
        archive: archive.to_owned(),
        entry: text.to_owned(),
    };
    if text.starts_with('/') || text.contains('\\') || text.contains('\0') {
        return Err(escape());
    }
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(escape()),
            // A drive letter (`C:`) would be absolute on Windows.
            p if p.contains(':') && parts.is_empty() => return Err(escape()),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(ArchiveError::BadPath {
            archive: archive.to_owned(),
        });
    }
    // The chart's own directory (`mychart/`).
    parts.remove(0);
    if parts.len() > max_depth {
        return Err(ArchiveError::TooDeep {
            archive: archive.to_owned(),
            entry: text.to_owned(),
            limit: max_depth,
        });
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// The tests' archive builder, shared with the integration tests.
#[cfg(test)]
#[path = "../../../tests/support/tgz.rs"]
mod test_tgz;

#[cfg(test)]
mod tests {
    use super::test_tgz as tgz;
    use super::*;

    fn open(dir: &std::path::Path) -> Dir {
        Dir::open_ambient_dir(dir, cap_std::ambient_authority()).unwrap()
    }

    fn unpack_to(
        bytes: &[u8],
        limits: &ArchiveLimits,
    ) -> (tempfile::TempDir, Result<(), ArchiveError>) {
        let tmp = tempfile::tempdir().unwrap();
        let result = unpack(
            bytes,
            "https://charts.test/x-1.0.0.tgz",
            &open(tmp.path()),
            limits,
        );
        (tmp, result)
    }

    const FILE: tar::EntryType = tar::EntryType::Regular;

    #[test]
    fn unpacking_stops_once_its_render_is_given_up() {
        let bytes = tgz::raw(&[("web/Chart.yaml", FILE, b"name: web\n")]);
        let interrupt = Interrupt::new();
        interrupt.raise();
        let (tmp, result) = interrupt.enter(|| unpack_to(&bytes, &ArchiveLimits::default()));
        assert!(
            matches!(result, Err(ArchiveError::Interrupted { .. })),
            "{result:?}"
        );
        assert!(!tmp.path().join("Chart.yaml").exists(), "nothing written");
    }

    #[test]
    fn unpacks_a_chart_stripping_its_top_directory() {
        let bytes = tgz::raw(&[
            ("web/Chart.yaml", FILE, b"name: web\nversion: 1.0.0\n"),
            ("web/templates/cm.yaml", FILE, b"kind: ConfigMap\n"),
        ]);
        let (tmp, result) = unpack_to(&bytes, &ArchiveLimits::default());
        result.unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("templates/cm.yaml")).unwrap(),
            "kind: ConfigMap\n"
        );
        assert!(tmp.path().join("Chart.yaml").is_file());
    }

    #[test]
    fn refuses_paths_escaping_the_archive() {
        let probe = "kiln-helm-escape-probe";
        for path in [
            "web/../../etc/passwd".to_owned(),
            "/etc/passwd".to_owned(),
            format!("../{probe}"),
            format!("web/a/../../../{probe}"),
            format!("C:/{probe}"),
            format!("web\\..\\{probe}"),
        ] {
            let path = path.as_str();
            let bytes = tgz::raw(&[(path, FILE, b"x")]);
            let (tmp, result) = unpack_to(&bytes, &ArchiveLimits::default());
            let err = result.unwrap_err();
            assert!(matches!(err, ArchiveError::Escape { .. }), "{path}: {err}");
            assert!(
                err.to_string().contains("path escapes the archive"),
                "{err}"
            );
            assert!(!tmp.path().parent().unwrap().join(probe).exists());
        }
    }

    #[test]
    fn refuses_links_and_devices() {
        for (kind, word) in [
            (tar::EntryType::Symlink, "symlink"),
            (tar::EntryType::Link, "hard link"),
            (tar::EntryType::Char, "device"),
            (tar::EntryType::Block, "device"),
            (tar::EntryType::Fifo, "FIFO"),
        ] {
            let bytes = tgz::raw(&[("web/values.yaml", kind, b"/etc/passwd")]);
            let (_tmp, result) = unpack_to(&bytes, &ArchiveLimits::default());
            let err = result.unwrap_err().to_string();
            assert!(
                err.contains(&format!("web/values.yaml: {word} entries are refused")),
                "{err}"
            );
        }
    }

    #[test]
    fn refuses_an_archive_bomb() {
        let zeros = vec![0u8; 4 << 20];
        let bytes = tgz::raw(&[("web/big", FILE, &zeros)]);
        assert!(bytes.len() < 64 << 10, "compresses well");
        let limits = ArchiveLimits {
            uncompressed: 1 << 20,
            ..ArchiveLimits::default()
        };
        let (_tmp, result) = unpack_to(&bytes, &limits);
        let err = result.unwrap_err();
        assert!(matches!(err, ArchiveError::Expands { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("expands to more than the 1048576-byte limit")
        );
    }

    #[test]
    fn refuses_too_large_too_many_and_too_deep() {
        let bytes = tgz::raw(&[("web/a", FILE, b"x"), ("web/b", FILE, b"y")]);
        let (_t, r) = unpack_to(
            &bytes,
            &ArchiveLimits {
                compressed: 10,
                ..ArchiveLimits::default()
            },
        );
        assert!(matches!(
            r.unwrap_err(),
            ArchiveError::TooLarge { limit: 10, .. }
        ));
        let (_t, r) = unpack_to(
            &bytes,
            &ArchiveLimits {
                entries: 1,
                ..ArchiveLimits::default()
            },
        );
        assert!(matches!(
            r.unwrap_err(),
            ArchiveError::TooManyEntries { limit: 1, .. }
        ));
        let deep = tgz::raw(&[("web/a/b/c/d", FILE, b"x")]);
        let (_t, r) = unpack_to(
            &deep,
            &ArchiveLimits {
                depth: 3,
                ..ArchiveLimits::default()
            },
        );
        assert!(matches!(
            r.unwrap_err(),
            ArchiveError::TooDeep { limit: 3, .. }
        ));
    }

    #[test]
    fn refuses_garbage_and_duplicates() {
        let (_t, r) = unpack_to(b"not gzip at all", &ArchiveLimits::default());
        assert!(matches!(r.unwrap_err(), ArchiveError::Corrupt { .. }));
        let bytes = tgz::raw(&[("web/a", FILE, b"x"), ("web/./a", FILE, b"y")]);
        let (_t, r) = unpack_to(&bytes, &ArchiveLimits::default());
        assert!(matches!(r.unwrap_err(), ArchiveError::Duplicate { .. }));
    }
}
