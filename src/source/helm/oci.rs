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
/// The most tags read to resolve a version constraint: 10 000 (more is
/// refused: a constraint resolved over part of the tags could pick a lower
/// version than Helm does).
pub const MAX_TAGS: usize = 10_000;
/// Tags asked for per page of a tag listing.
pub const TAG_PAGE: usize = 1_000;
/// Bytes of one page of a tag listing: 1 MiB (a page asks for 1,000 tags
/// of at most 128 bytes; a registry that sends more is refused, whatever
/// it declared).
pub const MAX_TAG_PAGE: u64 = 1 << 20;

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
    let tags = list_tags(client, base, auth, repository, timeout).await?;
    let parsed = Constraint::parse(if constraint.is_empty() {
        "*"
    } else {
        constraint
    })
    .map_err(|e| OciError::BadReference {
        reference: repository.to_owned(),
        message: e.to_string(),
    })?;
    tags.iter()
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

/// One page of `GET /v2/NAME/tags/list`.
#[derive(serde::Deserialize)]
struct TagPage {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// Every tag of `repository`, page by page (the registry's `Link` to the
/// next page, on its own origin only), each page read within
/// [`MAX_TAG_PAGE`] bytes and the whole within [`MAX_TAGS`] tags and the
/// timeout. The registry client's own listing reads a body whole, however
/// large (`n` is only a hint to the registry).
async fn list_tags(
    client: &oci_client::Client,
    base: &Reference,
    auth: &oci_client::secrets::RegistryAuth,
    repository: &str,
    timeout: Duration,
) -> Result<Vec<String>, OciError> {
    let name = format!("oci://{repository}");
    let fail = |message: String| {
        OciError::Registry(ArtifactError::Remote {
            reference: name.clone(),
            message,
        })
    };
    let too_large = || {
        OciError::Registry(ArtifactError::TooLarge {
            reference: name.clone(),
            limit: MAX_TAG_PAGE,
        })
    };
    // A pull token for the repository (anonymous ones too); `None` with
    // basic credentials, which go with each request instead.
    let token = registry::timed(
        &name,
        timeout,
        client.auth(base, auth, oci_client::RegistryOperation::Pull),
    )
    .await?;
    let registry = base.resolve_registry();
    let origin = format!("{}://{registry}", registry::scheme(registry));
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut url = format!("{origin}/v2/{}/tags/list?n={TAG_PAGE}", base.repository());
    let mut tags = Vec::new();
    loop {
        let mut request = http.get(&url);
        request = match (&token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, oci_client::secrets::RegistryAuth::Basic(user, password)) => {
                request.basic_auth(user, Some(password))
            }
            _ => request,
        };
        let page = tokio::time::timeout_at(deadline, async {
            let mut response = request.send().await.map_err(|e| fail(e.to_string()))?;
            if !response.status().is_success() {
                return Err(fail(format!(
                    "listing tags: HTTP {}",
                    response.status().as_u16()
                )));
            }
            if response.content_length().is_some_and(|n| n > MAX_TAG_PAGE) {
                return Err(too_large());
            }
            let next = response
                .headers()
                .get(reqwest::header::LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
                if (body.len() + chunk.len()) as u64 > MAX_TAG_PAGE {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            let page: TagPage =
                serde_json::from_slice(&body).map_err(|e| fail(format!("listing tags: {e}")))?;
            Ok((page.tags.unwrap_or_default(), next))
        })
        .await
        .map_err(|_| {
            OciError::Registry(ArtifactError::Timeout {
                reference: name.clone(),
                after: timeout,
            })
        })??;
        let (page, next) = page;
        if tags.len() + page.len() > MAX_TAGS {
            return Err(fail(format!(
                "more than {MAX_TAGS} tags: too many to resolve a version constraint over; name a version"
            )));
        }
        tags.extend(page);
        match next {
            // The next page is on the registry's own origin, or not read
            // (its token goes nowhere else).
            Some(next) if next.starts_with('/') => url = format!("{origin}{next}"),
            Some(next) if next.starts_with(&format!("{origin}/")) => url = next,
            Some(next) => {
                return Err(fail(format!(
                    "listing tags: the next page is elsewhere ({next})"
                )));
            }
            None => return Ok(tags),
        }
    }
}

/// The target of a `Link` header's `rel="next"` entry.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"))
            .then(|| target.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::{Path, Query};
    use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
    use std::collections::HashMap;

    /// A registry on loopback that serves only tag listings: `web` in two
    /// pages linked by `Link`, `huge` as one 2 MiB page, `elsewhere` with
    /// a next page on another origin.
    async fn registry() -> String {
        async fn tags(
            Path(name): Path<String>,
            Query(query): Query<HashMap<String, String>>,
        ) -> (StatusCode, HeaderMap, Vec<u8>) {
            let mut headers = HeaderMap::new();
            let body = match (name.as_str(), query.get("last").map(String::as_str)) {
                ("web", None) => {
                    headers.insert(
                        header::LINK,
                        HeaderValue::from_static(
                            "</v2/charts/web/tags/list?n=1000&last=1.2.0>; rel=\"next\"",
                        ),
                    );
                    r#"{"name":"charts/web","tags":["1.0.0","1.2.0"]}"#.as_bytes().to_vec()
                }
                ("web", Some(_)) => r#"{"name":"charts/web","tags":["1.10.0","2.0.0-rc.1"]}"#
                    .as_bytes()
                    .to_vec(),
                ("huge", _) => {
                    let tags = vec!["\"1.0.0\""; 2 << 20 >> 3].join(",");
                    format!(r#"{{"tags":[{tags}]}}"#).into_bytes()
                }
                ("elsewhere", _) => {
                    headers.insert(
                        header::LINK,
                        HeaderValue::from_static(
                            "<http://attacker.example/v2/x/tags/list?last=1>; rel=\"next\"",
                        ),
                    );
                    br#"{"tags":["1.0.0"]}"#.to_vec()
                }
                _ => return (StatusCode::NOT_FOUND, headers, Vec::new()),
            };
            (StatusCode::OK, headers, body)
        }
        let app = axum::Router::new()
            .route("/v2/", axum::routing::get(|| async { "{}" }))
            .route("/v2/charts/{name}/tags/list", axum::routing::get(tags));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        address.to_string()
    }

    async fn resolve(registry: &str, chart: &str, constraint: &str) -> Result<String, OciError> {
        let client = crate::artifact::registry::client(registry).unwrap();
        let base = Reference::with_tag(registry.into(), format!("charts/{chart}"), "latest".into());
        let auth = oci_client::secrets::RegistryAuth::Anonymous;
        let repository = format!("{registry}/charts/{chart}");
        resolve_tag(
            &client,
            &base,
            &auth,
            &repository,
            constraint,
            Duration::from_secs(10),
        )
        .await
    }

    #[tokio::test]
    async fn tags_are_read_page_by_page() {
        let registry = registry().await;
        assert_eq!(
            resolve(&registry, "web", ">=1.0.0").await.unwrap(),
            "1.10.0"
        );
        assert_eq!(resolve(&registry, "web", "~1.2").await.unwrap(), "1.2.0");
    }

    #[tokio::test]
    async fn attack_a_huge_tag_list_is_refused_at_the_page_limit() {
        let registry = registry().await;
        let err = resolve(&registry, "huge", "*")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("larger than the limit of {MAX_TAG_PAGE} bytes")),
            "{err}"
        );
        assert!(err.contains("charts/huge"), "{err}");
    }

    #[tokio::test]
    async fn attack_a_next_page_on_another_origin_is_not_followed() {
        let registry = registry().await;
        let err = resolve(&registry, "elsewhere", "*")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("the next page is elsewhere"), "{err}");
    }

    #[test]
    fn link_headers_name_the_next_page() {
        assert_eq!(
            next_link(r#"</v2/a/tags/list?n=2&last=b>; rel="next""#).as_deref(),
            Some("/v2/a/tags/list?n=2&last=b")
        );
        assert_eq!(
            next_link(r#"<https://x/prev>; rel="prev", <https://x/next>; rel=next"#).as_deref(),
            Some("https://x/next")
        );
        assert_eq!(next_link("garbage"), None);
    }
}
