//! A content-addressed store of fetched components: each digest is
//! downloaded once. Disposable, like every Kiln cache.

use std::io;
use std::path::Path;

use cap_std::fs::Dir;

use crate::digest::Digest;
use crate::private_dir;

/// Components by digest, in a directory opened through cap-std.
#[derive(Debug)]
pub struct Store {
    dir: Dir,
}

impl Store {
    /// Opens (creating it `0700`) the store directory; refuses one owned
    /// by another user or writable by group or others (see
    /// [`private_dir`]): a planted manifest record could point a signed
    /// manifest at another stored component.
    pub fn open(path: &Path) -> io::Result<Self> {
        let dir = private_dir::open(path).map_err(|e| match e {
            private_dir::PrivateDirError::Io { source, .. } => source,
            refused => io::Error::new(io::ErrorKind::PermissionDenied, refused),
        })?;
        Ok(Store { dir })
    }

    fn name(digest: &Digest) -> String {
        format!("sha256-{}.wasm", digest.hex())
    }

    /// The component with this digest, if stored and intact (a corrupt entry
    /// is removed and reported as missing).
    pub fn get(&self, digest: &Digest) -> Option<Vec<u8>> {
        let name = Self::name(digest);
        let bytes = self.dir.read(&name).ok()?;
        if Digest::of(&bytes) == *digest {
            Some(bytes)
        } else {
            tracing::warn!(%digest, "corrupt entry in the plugin store; fetching it again");
            let _ = self.dir.remove_file(&name);
            None
        }
    }

    /// Stores bytes under their digest (atomically) and returns it.
    pub fn put(&self, bytes: &[u8]) -> io::Result<Digest> {
        let digest = Digest::of(bytes);
        let name = Self::name(&digest);
        crate::atomic::replace(&self.dir, &name, bytes)?;
        Ok(digest)
    }

    /// Remembers which component a resolved OCI manifest carries, so a
    /// manifest digest seen before costs no download.
    pub fn remember_manifest(&self, manifest: &Digest, component: &Digest) -> io::Result<()> {
        crate::atomic::replace(
            &self.dir,
            &format!("manifest-{}", manifest.hex()),
            component.to_string().as_bytes(),
        )
    }

    /// The component digest of a manifest seen before.
    pub fn manifest(&self, manifest: &Digest) -> Option<Digest> {
        self.dir
            .read_to_string(format!("manifest-{}", manifest.hex()))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_by_digest_and_drops_corrupt_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let digest = store.put(b"component").unwrap();
        assert_eq!(store.get(&digest).unwrap(), b"component");
        std::fs::write(
            tmp.path().join(format!("sha256-{}.wasm", digest.hex())),
            b"tampered",
        )
        .unwrap();
        assert_eq!(store.get(&digest), None);
        let manifest = Digest::of(b"manifest");
        store.remember_manifest(&manifest, &digest).unwrap();
        assert_eq!(store.manifest(&manifest), Some(digest));
    }

    #[test]
    fn the_store_is_owner_only_and_refuses_a_shared_directory() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("kiln/plugins");
        Store::open(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&path), 0o700);
        assert_eq!(mode(&tmp.path().join("kiln")), 0o700);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = Store::open(&path).unwrap_err().to_string();
        assert!(err.contains("is writable by group and others"), "{err}");
    }
}
