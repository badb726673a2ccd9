//! Loading the plugins a command names: fetch (file, https, oci), verify
//! against the trust policy, compile.

use std::path::PathBuf;

use kiln::artifact::{Fetched, Fetcher, PluginRef};
use kiln::plugin::{Plugin, PluginHost, World};
use kiln::trust::{PolicyVerifier, Signatures, Verified};

/// Loads plugins for one command.
pub(crate) struct Loader {
    host: PluginHost,
    fetcher: Fetcher,
    trust: Option<PolicyVerifier>,
}

impl Loader {
    pub(crate) fn new(
        host: PluginHost,
        fetcher: Fetcher,
        trust_policy: Option<&PathBuf>,
    ) -> anyhow::Result<Self> {
        let trust = match trust_policy {
            Some(path) => Some(PolicyVerifier::load(path).map_err(|e| anyhow::anyhow!("{e}"))?),
            None => None,
        };
        Ok(Loader {
            host,
            fetcher,
            trust,
        })
    }

    /// Fetches, verifies and compiles one plugin.
    pub(crate) async fn load(&self, text: &str, world: World) -> anyhow::Result<Plugin> {
        let reference = PluginRef::parse(text)?;
        let name = plugin_name(&reference);
        let fetched = self.fetcher.fetch(&reference).await?;
        match &self.trust {
            None => eprintln!(
                "warning: plugin {name} ({}) is not verified: no --trust-policy given",
                fetched.digest
            ),
            Some(verifier) => {
                let shown = reference.to_string();
                let verified = match verifier.cached(&name, &shown, &fetched.digest) {
                    Some(done) => done,
                    None => {
                        let signatures = signatures(&self.fetcher, &reference, &fetched).await?;
                        verifier.verify(&name, &shown, &fetched.bytes, &signatures)?
                    }
                };
                match verified {
                    Verified::Insecure { digest } => {
                        eprintln!(
                            "WARNING: plugin {name} ({digest}) runs UNVERIFIED: the trust policy marks it insecure"
                        )
                    }
                    _ => {
                        tracing::info!(plugin = %name, digest = %fetched.digest, "plugin verified")
                    }
                }
            }
        }
        let host = self.host.clone();
        let bytes = fetched.bytes;
        let plugin =
            tokio::task::spawn_blocking(move || host.load(&name, &bytes, world, None)).await??;
        Ok(plugin)
    }
}

/// The signatures stored beside a fetched plugin.
pub(crate) async fn signatures(
    fetcher: &Fetcher,
    reference: &PluginRef,
    fetched: &Fetched,
) -> anyhow::Result<Signatures> {
    Ok(Signatures::beside(fetcher, reference, fetched).await?)
}

/// A plugin's name: the file stem, or the last path segment of its
/// repository or URL.
pub(crate) fn plugin_name(reference: &PluginRef) -> String {
    let raw = match reference {
        PluginRef::File { path, .. } => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        PluginRef::Oci { repository, .. } => {
            repository.rsplit('/').next().unwrap_or_default().to_owned()
        }
        PluginRef::Https { url, .. } => url.rsplit('/').next().unwrap_or_default().to_owned(),
        _ => String::new(),
    };
    let name = raw.strip_suffix(".wasm").unwrap_or(&raw);
    if name.is_empty() {
        "plugin".to_owned()
    } else {
        name.to_owned()
    }
}
