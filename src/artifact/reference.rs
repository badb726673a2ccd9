//! Plugin references.

use std::fmt;
use std::path::PathBuf;

use crate::digest::Digest;

/// Where a plugin comes from. Parsed once at the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PluginRef {
    /// `oci://registry/repository:tag` or `oci://registry/repository@sha256:…`:
    /// an OCI artifact with one wasm layer. A tag is resolved to a digest
    /// once; the digest is what is recorded and cached.
    Oci {
        /// `registry/repository`.
        repository: String,
        /// The tag, if the reference has one.
        tag: Option<String>,
        /// The manifest digest, if pinned.
        digest: Option<Digest>,
    },
    /// `https://host/path/plugin.wasm@sha256:…`: the pin is required.
    Https {
        /// The URL.
        url: String,
        /// The component's digest.
        sha256: Digest,
    },
    /// `file:///path/plugin.wasm` or a plain path (development), optionally
    /// pinned with `@sha256:…`.
    File {
        /// The file.
        path: PathBuf,
        /// The expected digest.
        sha256: Option<Digest>,
    },
}

/// A reference Kiln cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin reference `{reference}`: {reason}")]
pub struct RefError {
    reference: String,
    reason: String,
}

impl PluginRef {
    /// Parses a reference.
    pub fn parse(text: &str) -> Result<Self, RefError> {
        let fail = |reason: &str| RefError {
            reference: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (body, pin) = match text.rsplit_once("@sha256:") {
            Some((body, hex)) => {
                let digest = format!("sha256:{hex}")
                    .parse::<Digest>()
                    .map_err(|_| fail("the pin must be @sha256: followed by 64 hex digits"))?;
                (body, Some(digest))
            }
            None => (text, None),
        };
        if let Some(rest) = body.strip_prefix("oci://") {
            let (repository, tag) = match rest.rsplit_once(':') {
                // A colon after the last slash is a tag; before it, a port.
                Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_owned())),
                _ => (rest, None),
            };
            if repository.split('/').count() < 2 || repository.starts_with('/') {
                return Err(fail(
                    "expected oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]",
                ));
            }
            if tag.is_none() && pin.is_none() {
                return Err(fail(
                    "give a tag or a digest (oci://REGISTRY/REPOSITORY:TAG)",
                ));
            }
            Ok(PluginRef::Oci {
                repository: repository.to_owned(),
                tag,
                digest: pin,
            })
        } else if body.starts_with("https://") {
            let sha256 =
                pin.ok_or_else(|| fail("an https:// plugin needs a pin: URL@sha256:DIGEST"))?;
            Ok(PluginRef::Https {
                url: body.to_owned(),
                sha256,
            })
        } else if body.starts_with("http://") {
            Err(fail(
                "plain http is not accepted for plugins; use https:// with a sha256 pin",
            ))
        } else {
            let path = body.strip_prefix("file://").unwrap_or(body);
            if path.is_empty() {
                return Err(fail("empty path"));
            }
            Ok(PluginRef::File {
                path: PathBuf::from(path),
                sha256: pin,
            })
        }
    }

    /// Whether the plugin is a local file (not fetched over the network).
    pub fn is_local(&self) -> bool {
        matches!(self, PluginRef::File { .. })
    }

    /// Where the plugin comes from, without tag or pin: what trust-policy
    /// rules match (`references`). `oci://REGISTRY/REPOSITORY`; the
    /// `https://` URL as the `url` crate normalizes it (dot segments
    /// resolved, host lower-cased); `file://` and the canonical absolute
    /// path (symlinks and `..` resolved; this consults the filesystem, and
    /// falls back to the absolute path if the file does not exist).
    pub fn location(&self) -> String {
        match self {
            PluginRef::Oci { repository, .. } => format!("oci://{repository}"),
            PluginRef::Https { url, .. } => url::Url::parse(url)
                .map(String::from)
                .unwrap_or_else(|_| url.clone()),
            PluginRef::File { path, .. } => {
                let path = path
                    .canonicalize()
                    .or_else(|_| std::path::absolute(path))
                    .unwrap_or_else(|_| path.clone());
                format!("file://{}", path.display())
            }
        }
    }

    /// The registry host of an OCI reference.
    pub fn registry(&self) -> Option<&str> {
        match self {
            PluginRef::Oci { repository, .. } => repository.split('/').next(),
            _ => None,
        }
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginRef::Oci {
                repository,
                tag,
                digest,
            } => {
                write!(f, "oci://{repository}")?;
                if let Some(tag) = tag {
                    write!(f, ":{tag}")?;
                }
                if let Some(digest) = digest {
                    write!(f, "@{digest}")?;
                }
                Ok(())
            }
            PluginRef::Https { url, sha256 } => write!(f, "{url}@{sha256}"),
            PluginRef::File { path, sha256 } => {
                write!(f, "file://{}", path.display())?;
                if let Some(d) = sha256 {
                    write!(f, "@{d}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let hex = "a".repeat(64);
        let oci = PluginRef::parse("oci://127.0.0.1:5000/kiln/values:1.0").unwrap();
        assert_eq!(
            oci,
            PluginRef::Oci {
                repository: "127.0.0.1:5000/kiln/values".into(),
                tag: Some("1.0".into()),
                digest: None
            }
        );
        assert_eq!(oci.registry(), Some("127.0.0.1:5000"));
        let pinned = PluginRef::parse(&format!("oci://ghcr.io/acme/values@sha256:{hex}")).unwrap();
        assert!(matches!(
            pinned,
            PluginRef::Oci {
                tag: None,
                digest: Some(_),
                ..
            }
        ));
        assert_eq!(
            pinned.to_string(),
            format!("oci://ghcr.io/acme/values@sha256:{hex}")
        );
        assert!(matches!(
            PluginRef::parse(&format!("https://example.com/v.wasm@sha256:{hex}")).unwrap(),
            PluginRef::Https { .. }
        ));
        assert!(matches!(
            PluginRef::parse("plugins/dist/values.wasm").unwrap(),
            PluginRef::File { sha256: None, .. }
        ));
        assert_eq!(oci.location(), "oci://127.0.0.1:5000/kiln/values");
        assert_eq!(pinned.location(), "oci://ghcr.io/acme/values");
        assert_eq!(
            PluginRef::parse(&format!(
                "https://Plugins.Example.com/kiln/../other/v.wasm@sha256:{hex}"
            ))
            .unwrap()
            .location(),
            "https://plugins.example.com/other/v.wasm"
        );
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("sub")).unwrap();
        std::fs::write(real.join("v.wasm"), "").unwrap();
        let dotted = real.join("sub/../v.wasm");
        assert_eq!(
            PluginRef::parse(dotted.to_str().unwrap())
                .unwrap()
                .location(),
            format!("file://{}", real.join("v.wasm").display())
        );
        assert!(
            PluginRef::parse("relative.wasm")
                .unwrap()
                .location()
                .starts_with("file:///")
        );
        for bad in [
            "https://example.com/v.wasm",
            "http://example.com/v.wasm",
            "oci://ghcr.io/acme/values",
            "oci://values:1",
            "file://x@sha256:zz",
        ] {
            assert!(PluginRef::parse(bad).is_err(), "{bad}");
        }
    }
}
