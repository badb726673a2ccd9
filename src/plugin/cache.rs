//! The on-disk compile cache.
//!
//! Compiling a component with Cranelift takes hundreds of milliseconds;
//! loading a precompiled one takes a few. Entries are keyed by the
//! component's digest and the engine's compatibility hash (wasmtime version,
//! compiler settings, CPU features), so an upgraded Kiln never loads an
//! artefact another engine produced. Like every Kiln cache it is disposable:
//! a missing, truncated or foreign entry is recompiled and rewritten.

use std::hash::{Hash, Hasher};
use std::io;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::digest::Digest;

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

/// Precompiled components in a directory of their own.
#[derive(Debug)]
pub(crate) struct CompileCache {
    dir: Dir,
    engine_key: String,
}

/// Each entry starts with the SHA-256 of the artefact that follows, so a
/// torn or corrupted write is detected before wasmtime sees the bytes.
const HEADER: usize = 32;

impl CompileCache {
    /// Opens (creating it if needed) the cache directory for `engine`.
    pub(crate) fn open(path: &Path, engine: &Engine) -> io::Result<Self> {
        std::fs::create_dir_all(path)?;
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(&hasher.0.finalize()[..8]);
        Ok(CompileCache { dir, engine_key })
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
        let intact = data.len() > HEADER && Sha256::digest(&data[HEADER..])[..] == data[..HEADER];
        if !intact {
            tracing::warn!(entry = %name, "corrupt compile cache entry; recompiling");
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
        data.extend_from_slice(&Sha256::digest(artefact));
        data.extend_from_slice(artefact);
        // Write aside, then rename: readers see a whole entry or none.
        let tmp = format!("{name}.{}.tmp", std::process::id());
        self.dir.write(&tmp, &data)?;
        self.dir.rename(&tmp, &self.dir, name)
    }
}

/// Turns precompiled bytes back into a component.
///
/// This is the one `unsafe` call in Kiln. `Component::deserialize` trusts
/// its input to be machine code wasmtime produced; feeding it anything else
/// is undefined behaviour. The bytes given here are only ever (a) what
/// `Engine::precompile_component` returned in this process, or (b) a cache
/// entry this module wrote, whose SHA-256 header was verified just before
/// and whose name carries the engine's compatibility hash (wasmtime also
/// re-checks version and settings in the artefact's header).
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artefact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: see above: the bytes are produced by `precompile_component`,
    // either just now or by this cache, with their integrity verified.
    unsafe { Component::deserialize(engine, artefact) }
}
