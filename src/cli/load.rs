//! Loading the plugins a command names: fetch (file, https, oci), verify
//! against the trust policy, compile.

use std::path::{Path, PathBuf};

use kiln::artifact::{Fetched, Fetcher, PluginRef};
use kiln::plugin::{Plugin, PluginHost, World};
use kiln::trust::{PluginSubject, PolicyVerifier, Signatures, Verified};

/// Loads plugins for one command.
pub(crate) struct Loader {
    host: PluginHost,
    fetcher: Fetcher,
    trust: Option<PolicyVerifier>,
    insecure_skip_verify: bool,
}

/// A remote plugin, no trust policy and no `--insecure-skip-verify`.
#[derive(Debug, thiserror::Error)]
#[error(
    "plugin {reference} is not verified: give --trust-policy FILE to verify it, or --insecure-skip-verify to run a remote plugin unverified (development only)"
)]
pub(crate) struct Unverified {
    reference: String,
}

impl Loader {
    /// A loader verifying against `trust_policy`; without one, local files
    /// run with a warning and remote plugins only with
    /// `insecure_skip_verify`.
    pub(crate) fn new(
        host: PluginHost,
        fetcher: Fetcher,
        trust_policy: Option<&PathBuf>,
        insecure_skip_verify: bool,
    ) -> anyhow::Result<Self> {
        let trust = match trust_policy {
            Some(path) => Some(PolicyVerifier::load(path).map_err(|e| anyhow::anyhow!("{e}"))?),
            None => None,
        };
        Ok(Loader {
            host,
            fetcher,
            trust,
            insecure_skip_verify,
        })
    }

    /// Fetches, verifies and compiles one plugin. A bare name (`helm`,
    /// `required-labels`) that is no file here is a first-party plugin,
    /// found where [`first_party_places`] looks.
    pub(crate) async fn load(&self, text: &str, world: World) -> anyhow::Result<Plugin> {
        let found;
        let text = match first_party(text) {
            Some(Ok(path)) => {
                found = path.display().to_string();
                found.as_str()
            }
            Some(Err(NotFound { name, places })) => {
                let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
                anyhow::bail!(
                    "plugin {name}: no first-party plugin of that name here (looked for {}): \
                     give the plugin's file or oci:// reference, set KILN_PLUGIN_PATH to a directory \
                     holding {name}.wasm, or build it (scripts/build-plugins {name})",
                    looked.join(", ")
                );
            }
            None => text,
        };
        let reference = PluginRef::parse(text)?;
        let name = plugin_name(&reference);
        // Refused before anything is fetched.
        if self.trust.is_none() && !reference.is_local() && !self.insecure_skip_verify {
            return Err(Unverified {
                reference: reference.to_string(),
            }
            .into());
        }
        let fetched = self.fetcher.fetch(&reference).await?;
        match &self.trust {
            None if reference.is_local() => eprintln!(
                "warning: plugin {name} ({}) is not verified: no --trust-policy given",
                fetched.digest
            ),
            None => eprintln!(
                "WARNING: plugin {reference} ({}) runs UNVERIFIED (--insecure-skip-verify): anyone who controls its registry or server controls what it renders",
                fetched.digest
            ),
            Some(verifier) => {
                let subject = PluginSubject::reference(&reference);
                let verified = match verifier.cached(&subject, &fetched.digest) {
                    Some(done) => done,
                    None => {
                        let signatures = signatures(&self.fetcher, &reference, &fetched).await?;
                        verifier.verify(&subject, &fetched.bytes, &signatures)?
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

/// A first-party plugin named but not found.
struct NotFound {
    name: String,
    places: Vec<PathBuf>,
}

/// `text` as the name of a first-party plugin (letters, digits and `-`,
/// no file of that name here): the first file found for it, or where it
/// was looked for; `None` when `text` is a reference or a path.
fn first_party(text: &str) -> Option<Result<PathBuf, NotFound>> {
    let bare = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && text.starts_with(|c: char| c.is_ascii_lowercase());
    if !bare || Path::new(text).exists() {
        return None;
    }
    let places = first_party_places(text);
    Some(match places.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(NotFound {
            name: text.to_owned(),
            places,
        }),
    })
}

/// Where a first-party plugin `NAME.wasm` is looked for, in order: each
/// directory of `$KILN_PLUGIN_PATH` (`:`-separated), beside the kiln
/// binary (and its `plugins/` and `../share/kiln/plugins/`), then
/// `plugins/dist/` of the current directory (a checkout).
pub(crate) fn first_party_places(name: &str) -> Vec<PathBuf> {
    let file = format!("{name}.wasm");
    let mut places: Vec<PathBuf> = std::env::var_os("KILN_PLUGIN_PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(|dir| dir.join(&file))
                .collect()
        })
        .unwrap_or_default();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        places.push(dir.join(&file));
        places.push(dir.join("plugins").join(&file));
        places.push(dir.join("../share/kiln/plugins").join(&file));
    }
    places.push(Path::new("plugins/dist").join(&file));
    places
}

/// The signatures stored beside a fetched plugin.
pub(crate) async fn signatures(
    fetcher: &Fetcher,
    reference: &PluginRef,
    fetched: &Fetched,
) -> anyhow::Result<Signatures> {
    Ok(Signatures::beside(fetcher, reference, fetched).await?)
}

/// A plugin's name in messages: the file stem, or the last path segment of
/// its repository or URL. Never used to match trust-policy rules.
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
