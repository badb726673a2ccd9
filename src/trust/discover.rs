//! Where signatures live beside a plugin, by the kind of reference:
//!
//! - a file: `FILE.sig`, `FILE.*.sig`, `FILE.sigstore.json`,
//!   `FILE.*.sigstore.json` in the same directory;
//! - `https://…/NAME.wasm`: `https://…/NAME.wasm.sig` and
//!   `https://…/NAME.wasm.sigstore.json` on the same server;
//! - `oci://`: cosign's signature tag (`sha256-<manifest>.sig`) and Sigstore
//!   bundles stored as OCI referrers of the manifest (the referrers API, or
//!   the referrers tag schema `sha256-<manifest>` where the registry has no
//!   such API — what `cosign sign --new-bundle-format` and `kiln plugin
//!   push` write).

use super::Signatures;
use crate::artifact::{ArtifactError, Fetched, Fetcher, PluginRef};

impl Signatures {
    /// Finds the signatures stored beside a fetched plugin.
    pub async fn beside(
        fetcher: &Fetcher,
        reference: &PluginRef,
        fetched: &Fetched,
    ) -> Result<Self, ArtifactError> {
        match reference {
            PluginRef::File { path, .. } => {
                Signatures::next_to(path).map_err(|error| ArtifactError::Io {
                    path: path.clone(),
                    error,
                })
            }
            PluginRef::Https { url, .. } => {
                let sig = format!("{url}.sig");
                let bundle = format!("{url}.sigstore.json");
                let mut found = Signatures {
                    looked: vec![sig.clone(), bundle.clone()],
                    ..Default::default()
                };
                if let Some(text) = fetcher.beside(&sig).await? {
                    found.key_signatures.push(text);
                }
                if let Some(text) = fetcher.beside(&bundle).await? {
                    found.bundles.push(text);
                }
                Ok(found)
            }
            PluginRef::Oci { .. } => {
                let manifest = match &fetched.resolved {
                    PluginRef::Oci { digest, .. } => *digest,
                    _ => None,
                };
                let hex = manifest.map(|d| d.hex()).unwrap_or_default();
                Ok(Signatures {
                    cosign: fetcher.cosign_signatures(&fetched.resolved).await?,
                    bundles: fetcher.bundles(&fetched.resolved).await?,
                    manifest,
                    looked: vec![
                        format!("the cosign signature tag sha256-{hex}.sig"),
                        format!("Sigstore bundle referrers of sha256:{hex}"),
                    ],
                    ..Default::default()
                })
            }
        }
    }
}
