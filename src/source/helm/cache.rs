//! Unpacked charts by archive digest: each archive is downloaded and
//! unpacked once, in a directory only Kiln's user may write (`0700`, see
//! [`crate::private_dir`]), and the whole is kept under a byte budget by
//! removing the least recently used charts. Disposable, like every Kiln
//! cache.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::fs::Dir;

use super::archive::{self, ArchiveError, ArchiveLimits};
use crate::digest::Digest;
use crate::private_dir;

/// Default byte budget of the chart cache: 1 GiB.
pub const DEFAULT_MAX_CACHE_BYTES: u64 = 1 << 30;

/// The cache failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The cache directory is unusable (not ours, shared, unwritable).
    #[error("chart cache: {0}")]
    Dir(#[from] private_dir::PrivateDirError),
    /// The archive was refused.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// Reading or writing the cache failed.
    #[error("chart cache {}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Charts unpacked by archive digest.
#[derive(Debug)]
pub struct ChartCache {
    path: PathBuf,
    max_bytes: u64,
    limits: ArchiveLimits,
}

impl ChartCache {
    /// Opens (creating it `0700`) the cache at `path`.
    pub fn open(path: &Path, max_bytes: u64, limits: ArchiveLimits) -> Result<Self, CacheError> {
        private_dir::open(path)?;
        Ok(ChartCache {
            path: path.to_path_buf(),
            max_bytes,
            limits,
        })
    }

    fn entry(&self, digest: &Digest) -> PathBuf {
        self.path.join(format!("sha256-{}", digest.hex()))
    }

    /// The unpacked chart of this archive digest, if cached (and marks it
    /// used).
    pub fn get(&self, digest: &Digest) -> Option<PathBuf> {
        let path = self.entry(digest);
        if path.is_dir() {
            // The modification time orders eviction (least recently used).
            let _ = std::fs::File::open(&path).and_then(|f| f.set_modified(SystemTime::now()));
            Some(path)
        } else {
            None
        }
    }

    fn origins(&self, digest: &Digest) -> PathBuf {
        self.path.join(format!("sha256-{}.origins", digest.hex()))
    }

    /// The unpacked chart of this archive digest, if cached *and* once
    /// downloaded for `origin` (the repository whose index named it): an
    /// index naming the digest of a chart another repository served (a
    /// private one, fetched with credentials), even at that chart's URL,
    /// does not get it from the cache.
    pub fn get_from(&self, digest: &Digest, origin: &str) -> Option<PathBuf> {
        let listed = std::fs::read_to_string(self.origins(digest)).ok()?;
        if !listed.lines().any(|line| line == origin) {
            return None;
        }
        self.get(digest)
    }

    /// Records that the archive `digest` was downloaded (and checked) for
    /// the repository `origin`. Blocking.
    pub fn note_origin(&self, digest: &Digest, origin: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        let path = self.origins(digest);
        let listed = std::fs::read_to_string(&path).unwrap_or_default();
        if listed.lines().any(|line| line == origin) {
            return Ok(());
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?
            .write_all(format!("{origin}\n").as_bytes())
    }

    /// Unpacks `bytes` (whose digest the caller checked) under `digest`,
    /// then evicts old charts past the budget. Blocking.
    pub fn put(&self, digest: &Digest, bytes: &[u8], name: &str) -> Result<PathBuf, CacheError> {
        let io = |source| CacheError::Io {
            path: self.path.clone(),
            source,
        };
        let final_path = self.entry(digest);
        if final_path.is_dir() {
            return Ok(final_path);
        }
        let tmp = tempfile::Builder::new()
            .prefix(".unpack-")
            .tempdir_in(&self.path)
            .map_err(io)?;
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).map_err(io)?;
        archive::unpack(bytes, name, &dir, &self.limits)?;
        let tmp_path = tmp.keep();
        if let Err(e) = std::fs::rename(&tmp_path, &final_path) {
            let _ = std::fs::remove_dir_all(&tmp_path);
            // Another fetch unpacked the same archive first.
            if !final_path.is_dir() {
                return Err(io(e));
            }
        }
        self.evict(&final_path).map_err(io)?;
        Ok(final_path)
    }

    /// Removes the least recently used charts until the cache fits its
    /// budget (never `keep`).
    fn evict(&self, keep: &Path) -> io::Result<()> {
        let mut entries = Vec::new();
        let mut total = 0u64;
        for entry in std::fs::read_dir(&self.path)? {
            let entry = entry?;
            let name = entry.file_name();
            // Unpacked charts only (not their `.origins` records).
            if !name.to_string_lossy().starts_with("sha256-") || !entry.file_type()?.is_dir() {
                continue;
            }
            let size = dir_size(&entry.path())?;
            total += size;
            let used = entry.metadata()?.modified()?;
            entries.push((used, size, entry.path()));
        }
        entries.sort();
        for (_, size, path) in entries {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            tracing::debug!(path = %path.display(), "chart cache over budget: removing");
            std::fs::remove_dir_all(&path)?;
            let _ = std::fs::remove_file(path.with_extension("origins"));
            total -= size;
        }
        Ok(())
    }
}

/// What an entry of an unpacked chart costs on disk beyond its data: an
/// inode and a directory entry.
const ENTRY_COST: u64 = 512;
/// Files and directories take whole blocks.
const BLOCK: u64 = 4096;

/// What an unpacked chart costs on disk: every file and directory (the
/// chart's own included) its entry, every directory a block, every file its
/// bytes in whole blocks. File bytes alone would let an archive of ten
/// thousand empty directories cost nothing against the budget (it takes
/// 40 MB and ten thousand inodes).
fn dir_size(path: &Path) -> io::Result<u64> {
    let mut total = ENTRY_COST + BLOCK;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        total += if kind.is_dir() {
            dir_size(&entry.path())?
        } else {
            ENTRY_COST + entry.metadata()?.len().div_ceil(BLOCK) * BLOCK
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tgz(name: &str, size: usize) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        let data = vec![b'x'; size];
        let mut header = tar::Header::new_gnu();
        header.set_size(size as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, format!("{name}/Chart.yaml"), &data[..])
            .unwrap();
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_digest_is_served_only_to_the_origins_that_served_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache =
            ChartCache::open(&dir.path().join("c"), 1 << 30, ArchiveLimits::default()).unwrap();
        let bytes = tgz("a", 100);
        let digest = Digest::of(&bytes);
        cache.put(&digest, &bytes, "a").unwrap();
        assert!(cache.get_from(&digest, "https://private.example").is_none());
        cache
            .note_origin(&digest, "https://private.example")
            .unwrap();
        assert!(cache.get_from(&digest, "https://private.example").is_some());
        assert!(
            cache
                .get_from(&digest, "https://attacker.example")
                .is_none(),
            "another repository naming the same digest downloads it itself"
        );
    }

    #[test]
    fn stores_by_digest_and_keeps_to_its_budget() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("charts");
        // Each chart costs 2 entries and 2 blocks (its directory and
        // `Chart.yaml`): 9,216 bytes; two fit.
        let cache = ChartCache::open(&path, 20_000, ArchiveLimits::default()).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let a = tgz("a", 1000);
        let da = Digest::of(&a);
        assert!(cache.get(&da).is_none());
        let pa = cache.put(&da, &a, "a").unwrap();
        assert!(pa.join("Chart.yaml").is_file());
        assert_eq!(cache.get(&da), Some(pa.clone()));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = tgz("b", 1000);
        let db = Digest::of(&b);
        cache.put(&db, &b, "b").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let c = tgz("c", 1000);
        let dc = Digest::of(&c);
        cache.put(&dc, &c, "c").unwrap();
        assert!(cache.get(&da).is_none(), "the least recently used goes");
        assert!(cache.get(&db).is_some() && cache.get(&dc).is_some());
    }

    #[test]
    fn directories_and_blocks_count_against_the_budget_not_only_file_bytes() {
        // An archive of 2,200 empty directories holds no file byte.
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(gz);
        for i in 0..2_200 {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            header.set_mode(0o755);
            header.set_cksum();
            builder
                .append_data(&mut header, format!("hollow/d{i}/"), std::io::empty())
                .unwrap();
        }
        let hollow = builder.into_inner().unwrap().finish().unwrap();
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("charts");
        std::fs::create_dir_all(&dir).unwrap();
        let hollow_dir = dir.join("one");
        std::fs::create_dir_all(&hollow_dir).unwrap();
        let cap = Dir::open_ambient_dir(&hollow_dir, cap_std::ambient_authority()).unwrap();
        archive::unpack(&hollow, "hollow", &cap, &ArchiveLimits::default()).unwrap();
        assert!(dir_size(&hollow_dir).unwrap() >= 2_200 * (ENTRY_COST + BLOCK));

        // So it does not fit a 10 MB budget beside another chart: once
        // another is stored, the hollow one (least recently used) goes.
        let cache =
            ChartCache::open(&root.path().join("c"), 10_000_000, ArchiveLimits::default()).unwrap();
        let first = Digest::of(&hollow);
        cache.put(&first, &hollow, "hollow").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let other = tgz("x", 10);
        let second = Digest::of(&other);
        cache.put(&second, &other, "x").unwrap();
        assert!(cache.get(&second).is_some());
        assert!(cache.get(&first).is_none(), "its directories count");
    }
}
