//! The on-disk compile cache.
//!
//! Compiling a component with Cranelift takes hundreds of milliseconds;
//! loading a precompiled one takes a few. Entries are keyed by the
//! component's digest and the engine's compatibility hash (wasmtime version,
//! compiler settings, CPU features), so an upgraded Kiln never loads an
//! artefact another engine produced. Like every Kiln cache it is disposable:
//! a missing, truncated or foreign entry is recompiled and rewritten.
//!
//! A precompiled artefact is native code, loaded without further checks, so
//! the cache trusts nothing it did not write itself:
//! - the directory is created `0700`, and one owned by another user or
//!   writable by group or others is refused ([`crate::private_dir`]);
//! - each entry carries an HMAC-SHA256 over its name and artefact, keyed by
//!   a random secret of this installation ([`KEY_FILE`], created `0600` in
//!   the directory on first use). An entry someone else wrote or changed
//!   fails the MAC and is recompiled, never deserialized.

use std::hash::{Hash, Hasher};
use std::io;
use std::path::Path;

use cap_std::fs::Dir;
use hmac::{Hmac, Mac as _};
use rand_core::{OsRng, RngCore as _};
use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::digest::Digest;
use crate::private_dir::{self, PrivateDirError};

/// Feeds `Hash` input into SHA-256, so the engine's compatibility hash is
/// stable across processes (std's `DefaultHasher` makes no such promise).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Where a compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the on-disk cache.
    Hit,
    /// Compiled now (and stored, if a cache directory is configured).
    Compiled,
}

/// The compile cache directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// The directory is unsafe or cannot be opened.
    #[error(transparent)]
    Dir(#[from] PrivateDirError),
    /// The installation's MAC key cannot be read or created.
    #[error("{}: {source}", path.display())]
    Key {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The file, in the cache directory, holding this installation's secret
/// MAC key ([`KEY_LEN`] random bytes, mode `0600`).
pub(crate) const KEY_FILE: &str = "mac.key";

/// Length of the MAC key in bytes.
pub(crate) const KEY_LEN: usize = 32;

/// Each entry starts with the HMAC-SHA256 of its name and the artefact that
/// follows: a torn, corrupted or planted entry is detected before wasmtime
/// sees the bytes.
const HEADER: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The installation's secret: what makes an entry this cache's own.
struct MacKey([u8; KEY_LEN]);

impl std::fmt::Debug for MacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MacKey(..)")
    }
}

impl MacKey {
    /// Reads the key file of `dir`, creating it (`0600`, atomically, never
    /// replacing one another process created first) if it is missing or
    /// malformed.
    fn open(dir: &Dir) -> io::Result<Self> {
        for _ in 0..3 {
            match dir.read(KEY_FILE) {
                Ok(bytes) => match <[u8; KEY_LEN]>::try_from(bytes.as_slice()) {
                    Ok(key) => return Ok(MacKey(key)),
                    Err(_) => {
                        tracing::warn!(
                            file = KEY_FILE,
                            len = bytes.len(),
                            "malformed compile cache key; creating a new one (every entry will be recompiled)"
                        );
                        dir.remove_file(KEY_FILE)?;
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let mut key = [0u8; KEY_LEN];
            OsRng.fill_bytes(&mut key);
            // When another process created the key first, the next round
            // reads theirs.
            if crate::atomic::create(dir, KEY_FILE, &key)? {
                return Ok(MacKey(key));
            }
        }
        Err(io::Error::other(
            "the key file keeps changing under this process",
        ))
    }

    fn mac(&self, name: &str, artefact: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts keys of any length");
        // The name is bound in, length-prefixed: an entry moved under
        // another component's name does not verify.
        mac.update(&(name.len() as u64).to_be_bytes());
        mac.update(name.as_bytes());
        mac.update(artefact);
        mac
    }
}

/// Precompiled components in a directory of their own.
#[derive(Debug)]
pub(crate) struct CompileCache {
    dir: Dir,
    engine_key: String,
    key: MacKey,
}

impl CompileCache {
    /// Opens (creating it `0700` if needed) the cache directory for
    /// `engine`; refuses a directory another user could write.
    pub(crate) fn open(path: &Path, engine: &Engine) -> Result<Self, CacheError> {
        let dir = private_dir::open(path)?;
        let key = MacKey::open(&dir).map_err(|source| CacheError::Key {
            path: path.join(KEY_FILE),
            source,
        })?;
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(&hasher.0.finalize()[..8]);
        Ok(CompileCache {
            dir,
            engine_key,
            key,
        })
    }

    fn entry_name(&self, digest: &Digest) -> String {
        format!("{}-{}.cwasm", digest.hex(), self.engine_key)
    }

    /// Loads the component from the cache, or compiles and stores it.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &Digest,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let name = self.entry_name(digest);
        if let Some(component) = self.load(engine, &name) {
            return Ok((component, CacheOutcome::Hit));
        }
        let artefact = engine.precompile_component(bytes)?;
        if let Err(error) = self.store(&name, &artefact) {
            tracing::warn!(entry = %name, %error, "cannot write the compile cache; continuing without it");
        }
        let component = deserialize(engine, &artefact)?;
        Ok((component, CacheOutcome::Compiled))
    }

    fn load(&self, engine: &Engine, name: &str) -> Option<Component> {
        let data = match self.dir.read(name) {
            Ok(data) => data,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(entry = %name, %error, "unreadable compile cache entry; recompiling");
                return None;
            }
        };
        let authentic = data.len() > HEADER
            && self
                .key
                .mac(name, &data[HEADER..])
                .verify_slice(&data[..HEADER])
                .is_ok();
        if !authentic {
            tracing::warn!(entry = %name, "compile cache entry is corrupt or was not written by this installation (MAC mismatch); recompiling");
            return None;
        }
        match deserialize(engine, &data[HEADER..]) {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(entry = %name, error = %format!("{error:#}"), "stale compile cache entry; recompiling");
                None
            }
        }
    }

    fn store(&self, name: &str, artefact: &[u8]) -> io::Result<()> {
        let mut data = Vec::with_capacity(HEADER + artefact.len());
        data.extend_from_slice(&self.key.mac(name, artefact).finalize().into_bytes());
        data.extend_from_slice(artefact);
        // Readers see a whole entry or none.
        crate::atomic::replace(&self.dir, name, &data)
    }
}

/// Turns precompiled bytes back into a component.
///
/// This is the one `unsafe` call in Kiln. `Component::deserialize` trusts
/// its input to be machine code wasmtime produced; feeding it anything else
/// is undefined behaviour. The bytes given here are only ever (a) what
/// `Engine::precompile_component` returned in this process, or (b) a cache
/// entry this installation wrote: its HMAC, keyed by the installation's
/// secret and bound to the entry's name, was verified just before, the
/// directory is refused unless only this user can write it, and the name
/// carries the engine's compatibility hash (wasmtime also re-checks version
/// and settings in the artefact's header).
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artefact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: see above: the bytes are produced by `precompile_component`,
    // either just now or by this cache, with their MAC verified.
    unsafe { Component::deserialize(engine, artefact) }
}
