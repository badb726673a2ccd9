//! Plugin artifacts: references, distribution and a content-addressed store.
//!
//! A plugin comes from an OCI registry (`oci://`, one layer of media type
//! `application/vnd.wasm.content.layer.v1+wasm`, the convention Kubewarden
//! and others use), from HTTPS with a required `sha256` pin, or from a file
//! for development ([`PluginRef`]). Tags are resolved to digests once; the
//! digest is what is recorded and cached; a pinned digest that does not match
//! the bytes is refused. Fetched components land in a [`Store`] by digest, so
//! each is downloaded once.

mod reference;
pub(crate) mod registry;
mod store;

use std::path::PathBuf;
use std::time::Duration;

pub use reference::{PluginRef, RefError};
pub use registry::{BUNDLE_ARTIFACT_TYPE, CosignSignature, RegistryCredentials, RegistryError};
pub use store::Store;

use crate::digest::Digest;

/// A fetch or push failed. Messages name the reference, never credentials.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The reference is malformed.
    #[error(transparent)]
    Ref(#[from] RefError),
    /// A local file could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The bytes do not match the pinned digest.
    #[error("{reference}: digest mismatch: expected {expected}, got {found}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The pin.
        expected: Digest,
        /// The bytes' digest.
        found: Digest,
    },
    /// The registry or server refused our credentials (401).
    #[error("{reference}: unauthorized (401): check the registry credentials")]
    Unauthorized {
        /// The reference.
        reference: String,
    },
    /// The credentials lack permission (403).
    #[error("{reference}: forbidden (403)")]
    Forbidden {
        /// The reference.
        reference: String,
    },
    /// Nothing at the reference (404).
    #[error("{reference}: not found (404)")]
    NotFound {
        /// The reference.
        reference: String,
    },
    /// The server did not answer in time.
    #[error("{reference}: timed out after {after:?}")]
    Timeout {
        /// The reference.
        reference: String,
        /// The deadline.
        after: Duration,
    },
    /// The artifact has no wasm layer, or more than one.
    #[error("{reference}: {detail}")]
    NotAPlugin {
        /// The reference.
        reference: String,
        /// What is wrong.
        detail: String,
    },
    /// Any other registry or HTTP failure.
    #[error("{reference}: {message}")]
    Remote {
        /// The reference.
        reference: String,
        /// What went wrong.
        message: String,
    },
    /// The artifact is larger than Kiln accepts.
    #[error("{reference}: larger than the limit of {limit} bytes")]
    TooLarge {
        /// The reference.
        reference: String,
        /// The limit.
        limit: u64,
    },
    /// The local store failed.
    #[error("plugin store: {0}")]
    Store(std::io::Error),
}

/// How much a [`Fetcher`] downloads at most: bytes it did not ask for
/// never reach memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchLimits {
    /// The largest component (OCI layer, HTTPS body, file). Default: 128 MiB.
    pub component: u64,
    /// The largest signature or Sigstore bundle. Default: 1 MiB.
    pub signature: u64,
    /// The most signatures (or bundles) read for one artifact. Default: 32.
    pub signatures: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            component: 128 << 20,
            signature: 1 << 20,
            signatures: 32,
        }
    }
}

/// A fetched component.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// Their digest.
    pub digest: Digest,
    /// The reference with its resolved digest (for OCI: the manifest digest),
    /// what gets recorded.
    pub resolved: PluginRef,
}

/// Fetches and pushes plugin artifacts.
#[derive(Debug)]
pub struct Fetcher {
    store: Store,
    credentials: RegistryCredentials,
    timeout: Duration,
    tls_roots: Vec<reqwest::Certificate>,
    limits: FetchLimits,
}

impl Fetcher {
    /// A fetcher with a store and registry credentials. `timeout` bounds
    /// every network operation.
    pub fn new(store: Store, credentials: RegistryCredentials, timeout: Duration) -> Self {
        Fetcher {
            store,
            credentials,
            timeout,
            tls_roots: Vec::new(),
            limits: FetchLimits::default(),
        }
    }

    /// Downloads at most these sizes (default: [`FetchLimits::default`]).
    pub fn with_limits(mut self, limits: FetchLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Also trusts these PEM CA certificates for https:// plugins (a
    /// private CA), in addition to the system's roots.
    pub fn with_tls_roots(mut self, pem: &[u8]) -> Result<Self, ArtifactError> {
        self.tls_roots =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| ArtifactError::Remote {
                reference: "TLS roots".into(),
                message: e.to_string(),
            })?;
        Ok(self)
    }

    /// Fetches a component, from the store when its digest is known.
    pub async fn fetch(&self, reference: &PluginRef) -> Result<Fetched, ArtifactError> {
        let name = reference.to_string();
        match reference {
            PluginRef::File { path, sha256 } => {
                let io = |error| ArtifactError::Io {
                    path: path.clone(),
                    error,
                };
                let bytes = read_file(path, self.limits.component)
                    .await
                    .map_err(|e| match e {
                        FileRead::TooLarge => ArtifactError::TooLarge {
                            reference: name.clone(),
                            limit: self.limits.component,
                        },
                        FileRead::Io(error) => io(error),
                    })?;
                let digest = check_pin(&name, &bytes, *sha256)?;
                Ok(Fetched {
                    bytes,
                    digest,
                    resolved: PluginRef::File {
                        path: path.clone(),
                        sha256: Some(digest),
                    },
                })
            }
            PluginRef::Https { url, sha256 } => {
                let bytes = match self.store.get(sha256) {
                    Some(bytes) => bytes,
                    None => {
                        let bytes = self.download(&name, url, self.limits.component).await?;
                        check_pin(&name, &bytes, Some(*sha256))?;
                        self.store.put(&bytes).map_err(ArtifactError::Store)?;
                        bytes
                    }
                };
                Ok(Fetched {
                    bytes,
                    digest: *sha256,
                    resolved: reference.clone(),
                })
            }
            PluginRef::Oci { .. } => {
                registry::pull(
                    &self.store,
                    &self.credentials,
                    reference,
                    self.timeout,
                    &self.limits,
                )
                .await
            }
        }
    }

    /// Pushes a component to an OCI reference with a tag; returns the
    /// manifest digest.
    pub async fn push(&self, bytes: &[u8], reference: &PluginRef) -> Result<Digest, ArtifactError> {
        registry::push(&self.credentials, reference, bytes, self.timeout).await
    }

    /// The cosign signatures stored beside a resolved OCI reference (its
    /// `sha256-<manifest>.sig` tag).
    pub async fn cosign_signatures(
        &self,
        resolved: &PluginRef,
    ) -> Result<Vec<CosignSignature>, ArtifactError> {
        let Some(manifest) = manifest_of(resolved) else {
            return Ok(Vec::new());
        };
        registry::signatures(
            &self.credentials,
            resolved,
            manifest,
            self.timeout,
            &self.limits,
        )
        .await
    }

    /// Stores a cosign signature beside a resolved OCI reference.
    pub async fn push_cosign_signature(
        &self,
        resolved: &PluginRef,
        signature: CosignSignature,
    ) -> Result<(), ArtifactError> {
        let manifest = manifest_of(resolved).ok_or_else(|| ArtifactError::NotAPlugin {
            reference: resolved.to_string(),
            detail: "signatures are stored beside OCI artifacts resolved to a digest".into(),
        })?;
        registry::push_signature(
            &self.credentials,
            resolved,
            manifest,
            signature,
            self.timeout,
        )
        .await
    }

    /// The Sigstore bundles stored as OCI referrers of a resolved reference.
    pub async fn bundles(&self, resolved: &PluginRef) -> Result<Vec<String>, ArtifactError> {
        let Some(manifest) = manifest_of(resolved) else {
            return Ok(Vec::new());
        };
        registry::bundles(
            &self.credentials,
            resolved,
            manifest,
            self.timeout,
            &self.limits,
        )
        .await
    }

    /// Stores a Sigstore bundle as an OCI referrer of a resolved reference;
    /// returns the referrer manifest's digest.
    pub async fn push_bundle(
        &self,
        resolved: &PluginRef,
        bundle: &[u8],
    ) -> Result<Digest, ArtifactError> {
        let manifest = manifest_of(resolved).ok_or_else(|| ArtifactError::NotAPlugin {
            reference: resolved.to_string(),
            detail: "bundles are stored beside OCI artifacts resolved to a digest".into(),
        })?;
        registry::push_bundle(&self.credentials, resolved, manifest, bundle, self.timeout).await
    }

    /// A file published beside an https:// artifact (`URL.sig`,
    /// `URL.sigstore.json`): `None` when the server has none (404).
    pub async fn beside(&self, url: &str) -> Result<Option<String>, ArtifactError> {
        match self.download(url, url, self.limits.signature).await {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(ArtifactError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Downloads `url`, refusing a body larger than `max` bytes (declared
    /// or sent).
    async fn download(&self, name: &str, url: &str, max: u64) -> Result<Vec<u8>, ArtifactError> {
        let remote = |message: String| ArtifactError::Remote {
            reference: name.to_owned(),
            message,
        };
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .no_proxy()
            .tls_certs_merge(self.tls_roots.clone())
            .build()
            .map_err(|e| remote(e.to_string()))?;
        let response = client.get(url).send().await.map_err(|e| {
            if e.is_timeout() {
                ArtifactError::Timeout {
                    reference: name.to_owned(),
                    after: self.timeout,
                }
            } else {
                remote(e.to_string())
            }
        })?;
        match response.status().as_u16() {
            200..=299 => {}
            401 => {
                return Err(ArtifactError::Unauthorized {
                    reference: name.into(),
                });
            }
            403 => {
                return Err(ArtifactError::Forbidden {
                    reference: name.into(),
                });
            }
            404 => {
                return Err(ArtifactError::NotFound {
                    reference: name.into(),
                });
            }
            code => return Err(remote(format!("HTTP {code}"))),
        }
        let too_large = || ArtifactError::TooLarge {
            reference: name.to_owned(),
            limit: max,
        };
        if response.content_length().is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| remote(e.to_string()))? {
            if (bytes.len() + chunk.len()) as u64 > max {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

enum FileRead {
    TooLarge,
    Io(std::io::Error),
}

/// Reads a regular file of at most `max` bytes (never a FIFO or device,
/// which could block or never end; `/dev/zero` has length 0).
async fn read_file(path: &std::path::Path, max: u64) -> Result<Vec<u8>, FileRead> {
    use tokio::io::AsyncReadExt as _;
    let file = tokio::fs::File::open(path).await.map_err(FileRead::Io)?;
    let metadata = file.metadata().await.map_err(FileRead::Io)?;
    if !metadata.is_file() {
        return Err(FileRead::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(FileRead::Io)?;
    if bytes.len() as u64 > max {
        return Err(FileRead::TooLarge);
    }
    Ok(bytes)
}

/// The manifest digest of an OCI reference resolved to one.
fn manifest_of(resolved: &PluginRef) -> Option<&Digest> {
    match resolved {
        PluginRef::Oci {
            digest: Some(manifest),
            ..
        } => Some(manifest),
        _ => None,
    }
}

fn check_pin(reference: &str, bytes: &[u8], pin: Option<Digest>) -> Result<Digest, ArtifactError> {
    let found = Digest::of(bytes);
    match pin {
        Some(expected) if expected != found => Err(ArtifactError::DigestMismatch {
            reference: reference.to_owned(),
            expected,
            found,
        }),
        _ => Ok(found),
    }
}
