//! Charts in OCI registries (`oci://registry/charts/NAME`), as Helm stores
//! them: a manifest whose config is `application/vnd.cncf.helm.config.v1+json`
//! and whose one chart layer is
//! `application/vnd.cncf.helm.chart.content.v1.tar+gzip`. Pulled through
//! the same registry client, credentials and size cap as plugins.

use std::time::Duration;

use oci_client::Reference;

use super::index::{Constraint, parse_version};
use crate::artifact::ArtifactError;
use crate::artifact::registry::{self, RegistryCredentials};
use crate::digest::Digest;

/// The manifest annotation saying when an artifact was made.
pub const CREATED_ANNOTATION: &str = "org.opencontainers.image.created";

/// The config media type of a Helm chart artifact.
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// The media type of a Helm chart's archive layer.
pub const HELM_CHART_LAYER_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// The most tags read to resolve a version constraint: 10 000.
pub const MAX_TAGS: usize = 10_000;

/// An OCI chart could not be pulled. Each names the reference.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OciError {
    /// The reference does not parse.
    #[error("oci://{reference}: not a valid OCI reference: {message}")]
    BadReference {
        /// The reference.
        reference: String,
        /// Why.
        message: String,
    },
    /// The registry failed (the inner error names the reference).
    #[error(transparent)]
    Registry(#[from] ArtifactError),
    /// The artifact is not a Helm chart.
    #[error("oci://{reference}: not a Helm chart: {detail}")]
    NotAChart {
        /// The reference.
        reference: String,
        /// What is wrong.
        detail: String,
    },
    /// No tag matches the version constraint.
    #[error("oci://{reference}: no tag matches `{constraint}`")]
    NoVersion {
        /// The repository.
        reference: String,
        /// The constraint.
        constraint: String,
    },
    /// The registry sent a manifest or layer whose digest is not the one asked for.
    #[error("oci://{reference}: digest mismatch: expected {expected}, got {found}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The pinned digest.
        expected: String,
        /// What arrived.
        found: String,
    },
}

/// A chart pulled from a registry.
#[derive(Debug, Clone)]
pub struct OciChart {
    /// The archive's bytes; `None` when the caller already had this
    /// manifest's archive (nothing was downloaded but the manifest).
    pub archive: Option<Vec<u8>>,
    /// The manifest digest (the pin recorded).
    pub manifest: Digest,
    /// The version (tag) resolved.
    pub version: String,
    /// When it was made, as its manifest's
    /// `org.opencontainers.image.created` annotation says (`helm push`
    /// writes it), if it does.
    pub created: Option<String>,
}

/// Pulls `repository` (`registry/path/name`, no scheme) at `version`: an
/// exact version or tag, `sha256:…` digest, or a semver constraint over the
/// repository's tags (Helm writes `+` as `_` in tags). Refuses a layer
/// larger than `max` bytes. The layer is not downloaded when `have` says
/// the manifest's archive is already at hand.
pub async fn pull(
    credentials: &RegistryCredentials,
    have: &(dyn Fn(&Digest) -> bool + Send + Sync),
    repository: &str,
    version: &str,
    max: u64,
    timeout: Duration,
) -> Result<OciChart, OciError> {
    let bad = |message: String| OciError::BadReference {
        reference: repository.to_owned(),
        message,
    };
    let (registry_host, path) = repository
        .split_once('/')
        .ok_or_else(|| bad("no repository path".into()))?;
    let name = format!("oci://{repository}");
    let client = registry::client(registry_host).map_err(|e| registry::error(&name, e))?;
    let auth = credentials.auth(registry_host);
    let version = version.trim();
    let (reference, tag) = if version.starts_with("sha256:") {
        (
            Reference::with_digest(registry_host.into(), path.into(), version.into()),
            version.to_owned(),
        )
    } else {
        let base = Reference::with_tag(registry_host.into(), path.into(), "latest".into());
        let tag = if version.is_empty() || looks_like_constraint(version) {
            resolve_tag(&client, &base, &auth, repository, version, timeout).await?
        } else {
            version.replace('+', "_")
        };
        (
            Reference::with_tag(registry_host.into(), path.into(), tag.clone()),
            tag,
        )
    };
    let (manifest, digest) = registry::timed(
        &name,
        timeout,
        client.pull_image_manifest(&reference, &auth),
    )
    .await?;
    if version.starts_with("sha256:") && digest != version {
        return Err(OciError::DigestMismatch {
            reference: name,
            expected: version.to_owned(),
            found: digest,
        });
    }
    let manifest_digest: Digest = digest.parse().map_err(|_| OciError::NotAChart {
        reference: repository.to_owned(),
        detail: format!("registry sent an unusable manifest digest `{digest}`"),
    })?;
    if manifest.config.media_type != HELM_CONFIG_MEDIA_TYPE {
        return Err(OciError::NotAChart {
            reference: repository.to_owned(),
            detail: format!(
                "config media type is {}, not {HELM_CONFIG_MEDIA_TYPE}",
                manifest.config.media_type
            ),
        });
    }
    let layers: Vec<_> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == HELM_CHART_LAYER_MEDIA_TYPE)
        .collect();
    let [layer] = &layers[..] else {
        return Err(OciError::NotAChart {
            reference: repository.to_owned(),
            detail: format!(
                "expected exactly one {HELM_CHART_LAYER_MEDIA_TYPE} layer, found {}",
                layers.len()
            ),
        });
    };
    let created = manifest
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_ANNOTATION))
        .cloned();
    if have(&manifest_digest) {
        return Ok(OciChart {
            archive: None,
            manifest: manifest_digest,
            version: tag.replace('_', "+"),
            created,
        });
    }
    let by_digest = reference.clone_with_digest(digest.clone());
    let archive = registry::pull_capped(&client, &by_digest, &name, layer, max, timeout).await?;
    let found = Digest::of(&archive).to_string();
    if found != layer.digest {
        return Err(OciError::DigestMismatch {
            reference: name,
            expected: layer.digest.clone(),
            found,
        });
    }
    Ok(OciChart {
        archive: Some(archive),
        manifest: manifest_digest,
        version: tag.replace('_', "+"),
        created,
    })
}

fn looks_like_constraint(version: &str) -> bool {
    version.contains(['*', '>', '<', '=', '~', '^', ' ', ',', '|'])
        || version.split('.').any(|p| p == "x" || p == "X")
        || parse_version(version).is_none()
}

async fn resolve_tag(
    client: &oci_client::Client,
    base: &Reference,
    auth: &oci_client::secrets::RegistryAuth,
    repository: &str,
    constraint: &str,
    timeout: Duration,
) -> Result<String, OciError> {
    let name = format!("oci://{repository}");
    let tags = registry::timed(
        &name,
        timeout,
        client.list_tags(base, auth, Some(MAX_TAGS), None),
    )
    .await?;
    let parsed = Constraint::parse(if constraint.is_empty() {
        "*"
    } else {
        constraint
    })
    .map_err(|e| OciError::BadReference {
        reference: repository.to_owned(),
        message: e.to_string(),
    })?;
    tags.tags
        .iter()
        .filter_map(|tag| Some((parse_version(&tag.replace('_', "+"))?, tag)))
        .filter(|(v, _)| parsed.matches(v))
        .max_by(|a, b| {
            (a.0.major, a.0.minor, a.0.patch, &a.0.pre)
                .cmp(&(b.0.major, b.0.minor, b.0.patch, &b.0.pre))
        })
        .map(|(_, tag)| tag.clone())
        .ok_or_else(|| OciError::NoVersion {
            reference: repository.to_owned(),
            constraint: constraint.to_owned(),
        })
}
