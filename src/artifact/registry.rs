//! OCI registries: credentials, pull and push, with `oci-client`.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{
    ImageIndexEntry, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageIndex, OciImageManifest,
    WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::{ArtifactError, FetchLimits, Fetched, PluginRef, Store};
use crate::digest::Digest;

/// Registry credentials by host, from Docker's `config.json` format (which is
/// also the content of a `kubernetes.io/dockerconfigjson` Secret). Never
/// logged; `Debug` lists hosts only.
#[derive(Clone, Default)]
pub struct RegistryCredentials {
    by_host: BTreeMap<String, (String, String)>,
}

impl std::fmt::Debug for RegistryCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryCredentials")
            .field("hosts", &self.by_host.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A credentials file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("registry credentials: {0}")]
pub struct RegistryError(String);

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(serde::Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl RegistryCredentials {
    /// No credentials: anonymous access.
    pub fn none() -> Self {
        Self::default()
    }

    /// Basic credentials for one registry `host` (`host[:port]`), as an
    /// Argo CD repository Secret with `enableOCI` gives them.
    pub fn basic(host: &str, username: &str, password: &str) -> Self {
        let mut by_host = BTreeMap::new();
        by_host.insert(
            host.trim_end_matches('/').to_owned(),
            (username.to_owned(), password.to_owned()),
        );
        RegistryCredentials { by_host }
    }

    /// Adds `other`'s hosts (its entries win).
    pub fn merge(&mut self, other: RegistryCredentials) {
        self.by_host.extend(other.by_host);
    }

    /// Parses a Docker `config.json` / `.dockerconfigjson`.
    pub fn from_docker_config(json: &str) -> Result<Self, RegistryError> {
        let config: DockerConfig =
            serde_json::from_str(json).map_err(|e| RegistryError(e.to_string()))?;
        let mut by_host = BTreeMap::new();
        for (host, auth) in config.auths {
            let host = host
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .trim_end_matches("/v1")
                .trim_end_matches("/v2")
                .to_owned();
            let pair = match (auth.auth, auth.username, auth.password) {
                (Some(encoded), _, _) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(encoded.trim())
                        .map_err(|_| RegistryError(format!("{host}: `auth` is not base64")))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| RegistryError(format!("{host}: `auth` is not UTF-8")))?;
                    let (user, password) = text.split_once(':').ok_or_else(|| {
                        RegistryError(format!("{host}: `auth` is not user:password"))
                    })?;
                    (user.to_owned(), password.to_owned())
                }
                (None, Some(user), Some(password)) => (user, password),
                _ => continue,
            };
            by_host.insert(host, pair);
        }
        Ok(RegistryCredentials { by_host })
    }

    /// The credentials for one registry host (anonymous if none).
    pub(crate) fn auth(&self, registry: &str) -> RegistryAuth {
        match self.by_host.get(registry) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// Registries on loopback speak plain HTTP (tests, local trials); every other
/// registry HTTPS.
pub(crate) fn client(registry: &str) -> Result<Client, OciDistributionError> {
    let protocol = if scheme(registry) == "http" {
        ClientProtocol::HttpsExcept(vec![registry.to_owned()])
    } else {
        ClientProtocol::Https
    };
    Client::try_from(ClientConfig {
        protocol,
        ..Default::default()
    })
}

/// The scheme `registry` (`host[:port]`) is spoken with: `http` on
/// loopback, `https` everywhere else.
pub(crate) fn scheme(registry: &str) -> &'static str {
    let host = registry.rsplit_once(':').map_or(registry, |(h, _)| h);
    if matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
        "http"
    } else {
        "https"
    }
}

/// What every registry operation starts with: the parsed reference, its
/// display name (for errors), the credentials of its registry and a client.
struct Session {
    parsed: Reference,
    name: String,
    auth: RegistryAuth,
    client: Client,
}

impl Session {
    fn open(
        credentials: &RegistryCredentials,
        reference: &PluginRef,
    ) -> Result<Self, ArtifactError> {
        let (parsed, name) = oci_reference(reference)?;
        let registry = parsed.resolve_registry().to_owned();
        let auth = credentials.auth(&registry);
        let client = client(&registry).map_err(|e| error(&name, e))?;
        Ok(Session {
            parsed,
            name,
            auth,
            client,
        })
    }
}

fn oci_reference(reference: &PluginRef) -> Result<(Reference, String), ArtifactError> {
    let name = reference.to_string();
    let PluginRef::Oci {
        repository,
        tag,
        digest,
    } = reference
    else {
        return Err(ArtifactError::NotAPlugin {
            reference: name,
            detail: "not an oci:// reference".into(),
        });
    };
    let (registry, repo) = repository.split_once('/').unwrap_or((repository, ""));
    let parsed = match (tag, digest) {
        (_, Some(digest)) => {
            Reference::with_digest(registry.into(), repo.into(), digest.to_string())
        }
        (Some(tag), None) => Reference::with_tag(registry.into(), repo.into(), tag.clone()),
        (None, None) => {
            return Err(ArtifactError::NotAPlugin {
                reference: name,
                detail: "no tag or digest".into(),
            });
        }
    };
    Ok((parsed, name))
}

pub(crate) fn error(reference: &str, e: OciDistributionError) -> ArtifactError {
    let reference = reference.to_owned();
    match &e {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            ArtifactError::Unauthorized { reference }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => {
            ArtifactError::NotFound { reference }
        }
        OciDistributionError::ServerError { code: 401, .. } => {
            ArtifactError::Unauthorized { reference }
        }
        OciDistributionError::ServerError { code: 403, .. } => {
            ArtifactError::Forbidden { reference }
        }
        OciDistributionError::ServerError { code: 404, .. } => {
            ArtifactError::NotFound { reference }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    oci_client::errors::OciErrorCode::ManifestUnknown
                        | oci_client::errors::OciErrorCode::NameUnknown
                        | oci_client::errors::OciErrorCode::NotFound
                )
            }) =>
        {
            ArtifactError::NotFound { reference }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if envelope
                .errors
                .iter()
                .any(|e| matches!(e.code, oci_client::errors::OciErrorCode::Unauthorized)) =>
        {
            ArtifactError::Unauthorized { reference }
        }
        _ => ArtifactError::Remote {
            reference,
            message: e.to_string(),
        },
    }
}

pub(crate) async fn timed<T>(
    reference: &str,
    after: Duration,
    f: impl std::future::Future<Output = Result<T, OciDistributionError>>,
) -> Result<T, ArtifactError> {
    match tokio::time::timeout(after, f).await {
        Err(_) => Err(ArtifactError::Timeout {
            reference: reference.to_owned(),
            after,
        }),
        Ok(result) => result.map_err(|e| error(reference, e)),
    }
}

/// Pulls one blob of at most `max` bytes: refused when the manifest
/// declares it larger, and cut off (refused) when the registry sends more
/// than that, whatever it declared.
pub(crate) async fn pull_capped(
    client: &Client,
    image: &Reference,
    name: &str,
    layer: &OciDescriptor,
    max: u64,
    timeout: Duration,
) -> Result<Vec<u8>, ArtifactError> {
    let too_large = || ArtifactError::TooLarge {
        reference: name.to_owned(),
        limit: max,
    };
    if u64::try_from(layer.size).map_or(true, |size| size > max) {
        return Err(too_large());
    }
    let mut out = Capped {
        bytes: Vec::new(),
        max,
    };
    match timed(name, timeout, client.pull_blob(image, layer, &mut out)).await {
        Err(_) if out.bytes.len() as u64 >= max => Err(too_large()),
        result => result.map(|()| out.bytes),
    }
}

/// A buffer that refuses to grow past `max` bytes.
struct Capped {
    bytes: Vec<u8>,
    max: u64,
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if (self.bytes.len() + buf.len()) as u64 > self.max {
            let max = self.max as usize;
            self.bytes.resize(max, 0);
            return std::task::Poll::Ready(Err(std::io::Error::other(
                "blob larger than its limit",
            )));
        }
        self.bytes.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Resolves the tag (once), then returns the component from the store or
/// pulls its wasm layer.
pub(super) async fn pull(
    store: &Store,
    credentials: &RegistryCredentials,
    reference: &PluginRef,
    timeout: Duration,
    limits: &FetchLimits,
) -> Result<Fetched, ArtifactError> {
    let Session {
        parsed,
        name,
        auth,
        client,
    } = Session::open(credentials, reference)?;
    let manifest_digest: Digest = match reference {
        PluginRef::Oci {
            digest: Some(d), ..
        } => *d,
        _ => {
            let text = timed(&name, timeout, client.fetch_manifest_digest(&parsed, &auth)).await?;
            text.parse().map_err(|_| ArtifactError::Remote {
                reference: name.clone(),
                message: format!("registry sent an unusable digest `{text}`"),
            })?
        }
    };
    let PluginRef::Oci {
        repository, tag, ..
    } = reference
    else {
        unreachable!("checked by oci_reference")
    };
    let resolved = PluginRef::Oci {
        repository: repository.clone(),
        tag: tag.clone(),
        digest: Some(manifest_digest),
    };
    if let Some(component) = store.manifest(&manifest_digest)
        && let Some(bytes) = store.get(&component)
    {
        return Ok(Fetched {
            bytes,
            digest: component,
            resolved,
        });
    }
    let by_digest = parsed.clone_with_digest(manifest_digest.to_string());
    let (manifest, _) = timed(
        &name,
        timeout,
        client.pull_image_manifest(&by_digest, &auth),
    )
    .await?;
    let wasm: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    let [layer] = &wasm[..] else {
        return Err(ArtifactError::NotAPlugin {
            reference: name,
            detail: format!(
                "expected exactly one {WASM_LAYER_MEDIA_TYPE} layer, found {}",
                wasm.len()
            ),
        });
    };
    let bytes = pull_capped(&client, &by_digest, &name, layer, limits.component, timeout).await?;
    let digest = store.put(&bytes).map_err(ArtifactError::Store)?;
    store
        .remember_manifest(&manifest_digest, &digest)
        .map_err(ArtifactError::Store)?;
    Ok(Fetched {
        bytes,
        digest,
        resolved,
    })
}

/// Pushes one wasm layer (with the wasm config media type) under a tag.
pub(super) async fn push(
    credentials: &RegistryCredentials,
    reference: &PluginRef,
    bytes: &[u8],
    timeout: Duration,
) -> Result<Digest, ArtifactError> {
    let Session {
        parsed,
        name,
        auth,
        client,
    } = Session::open(credentials, reference)?;
    let layer = ImageLayer::new(bytes.to_vec(), WASM_LAYER_MEDIA_TYPE.to_owned(), None);
    let config = Config::new(b"{}".to_vec(), WASM_CONFIG_MEDIA_TYPE.to_owned(), None);
    let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    timed(
        &name,
        timeout,
        client.push(&parsed, &[layer], config, &auth, Some(manifest)),
    )
    .await?;
    let digest = timed(&name, timeout, client.fetch_manifest_digest(&parsed, &auth)).await?;
    digest.parse().map_err(|_| ArtifactError::Remote {
        reference: name,
        message: format!("registry sent an unusable digest `{digest}`"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_formats() {
        let json = r#"{"auths": {
            "https://ghcr.io/v2/": {"auth": "dXNlcjpwYXNz"},
            "127.0.0.1:5000": {"username": "kiln", "password": "s3cret"},
            "empty.example": {}
        }}"#;
        let creds = RegistryCredentials::from_docker_config(json).unwrap();
        assert!(
            matches!(creds.auth("ghcr.io"), RegistryAuth::Basic(u, p) if u == "user" && p == "pass")
        );
        assert!(matches!(creds.auth("127.0.0.1:5000"), RegistryAuth::Basic(u, _) if u == "kiln"));
        assert!(matches!(creds.auth("docker.io"), RegistryAuth::Anonymous));
        assert!(!format!("{creds:?}").contains("s3cret"));
        assert!(
            RegistryCredentials::from_docker_config(r#"{"auths":{"h":{"auth":"%%"}}}"#).is_err()
        );
    }
}

/// cosign's media type for a simple-signing payload layer.
const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// cosign's annotation holding the base64 signature over the payload.
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// A cosign-style signature stored beside an OCI artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignSignature {
    /// The simple-signing JSON payload (names the signed manifest digest).
    pub payload: Vec<u8>,
    /// Base64 signature over `payload`.
    pub signature: String,
}

impl CosignSignature {
    /// The payload cosign signs for a manifest: a "cosign container image
    /// signature" naming the repository and the manifest digest.
    pub fn payload_for(repository: &str, manifest: &Digest) -> Vec<u8> {
        serde_json::json!({
            "critical": {
                "identity": {"docker-reference": repository},
                "image": {"docker-manifest-digest": manifest.to_string()},
                "type": "cosign container image signature",
            },
            "optional": null,
        })
        .to_string()
        .into_bytes()
    }

    /// The manifest digest the payload vouches for.
    pub fn signed_manifest(&self) -> Option<Digest> {
        let value: serde_json::Value = serde_json::from_slice(&self.payload).ok()?;
        value
            .pointer("/critical/image/docker-manifest-digest")?
            .as_str()?
            .parse()
            .ok()
    }
}

/// The cosign signature tag of a manifest: `sha256-<hex>.sig`.
fn signature_reference(parsed: &Reference, manifest: &Digest) -> Reference {
    Reference::with_tag(
        parsed.registry().to_owned(),
        parsed.repository().to_owned(),
        format!("sha256-{}.sig", manifest.hex()),
    )
}

/// The cosign signatures stored for a manifest (none if the tag is absent).
pub(super) async fn signatures(
    credentials: &RegistryCredentials,
    reference: &PluginRef,
    manifest: &Digest,
    timeout: Duration,
    limits: &FetchLimits,
) -> Result<Vec<CosignSignature>, ArtifactError> {
    let Session {
        parsed,
        name,
        auth,
        client,
    } = Session::open(credentials, reference)?;
    let tag = signature_reference(&parsed, manifest);
    let image = match timed(&name, timeout, client.pull_image_manifest(&tag, &auth)).await {
        Ok((image, _)) => image,
        Err(ArtifactError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for layer in image.layers.iter().take(limits.signatures) {
        if layer.media_type != SIMPLE_SIGNING {
            continue;
        }
        let Some(signature) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            continue;
        };
        let payload = pull_capped(&client, &tag, &name, layer, limits.signature, timeout).await?;
        found.push(CosignSignature {
            payload,
            signature: signature.clone(),
        });
    }
    Ok(found)
}

/// Adds a signature to the manifest's cosign signature tag, keeping the
/// signatures already there.
pub(super) async fn push_signature(
    credentials: &RegistryCredentials,
    reference: &PluginRef,
    manifest: &Digest,
    signature: CosignSignature,
    timeout: Duration,
) -> Result<(), ArtifactError> {
    let mut all = signatures(
        credentials,
        reference,
        manifest,
        timeout,
        &FetchLimits::default(),
    )
    .await?;
    if !all.contains(&signature) {
        all.push(signature);
    }
    let Session {
        parsed,
        name,
        auth,
        client,
    } = Session::open(credentials, reference)?;
    let layers: Vec<ImageLayer> = all
        .into_iter()
        .map(|s| {
            let annotations = BTreeMap::from([(SIGNATURE_ANNOTATION.to_owned(), s.signature)]);
            ImageLayer::new(s.payload, SIMPLE_SIGNING.to_owned(), Some(annotations))
        })
        .collect();
    let config = Config::oci_v1(b"{}".to_vec(), None);
    let mut signature_manifest = OciImageManifest::build(&layers, &config, None);
    signature_manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    let tag = signature_reference(&parsed, manifest);
    timed(
        &name,
        timeout,
        client.push(&tag, &layers, config, &auth, Some(signature_manifest)),
    )
    .await?;
    Ok(())
}

/// The artifact type of a Sigstore bundle stored as an OCI referrer (what
/// `cosign sign --new-bundle-format` writes).
pub const BUNDLE_ARTIFACT_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The OCI empty descriptor's media type (config of an artifact manifest).
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The media type of an OCI image index (the referrers tag schema).
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// The Sigstore bundles stored as referrers of a manifest: the registry's
/// referrers API, or the referrers tag schema (`sha256-<hex>`, an index)
/// where the registry has no such API.
pub(super) async fn bundles(
    credentials: &RegistryCredentials,
    reference: &PluginRef,
    manifest: &Digest,
    timeout: Duration,
    limits: &FetchLimits,
) -> Result<Vec<String>, ArtifactError> {
    let Session {
        parsed,
        name,
        auth,
        client,
    } = Session::open(credentials, reference)?;
    let subject = parsed.clone_with_digest(manifest.to_string());
    // Authenticates for pulls of this repository (oci-client keeps tokens).
    timed(
        &name,
        timeout,
        client.auth(&subject, &auth, oci_client::RegistryOperation::Pull),
    )
    .await?;
    let index = timed(
        &name,
        timeout,
        client.pull_referrers(&subject, Some(BUNDLE_ARTIFACT_TYPE)),
    )
    .await?;
    let mut found = Vec::new();
    for entry in index.manifests.into_iter().take(limits.signatures) {
        if entry.artifact_type.as_deref() != Some(BUNDLE_ARTIFACT_TYPE) {
            continue;
        }
        let by_digest = parsed.clone_with_digest(entry.digest.clone());
        let (manifest, _) = timed(
            &name,
            timeout,
            client.pull_image_manifest(&by_digest, &auth),
        )
        .await?;
        for layer in manifest.layers.iter().take(limits.signatures) {
            let bytes =
                pull_capped(&client, &by_digest, &name, layer, limits.signature, timeout).await?;
            found.push(String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    Ok(found)
}

/// Stores a Sigstore bundle as a referrer of `manifest` (a manifest whose
/// `subject` is the component's, artifact type [`BUNDLE_ARTIFACT_TYPE`]),
/// and lists it in the referrers tag schema's index so that registries
/// without a referrers API serve it too.
pub(super) async fn push_bundle(
    credentials: &RegistryCredentials,
    reference: &PluginRef,
    manifest: &Digest,
    bundle: &[u8],
    timeout: Duration,
) -> Result<Digest, ArtifactError> {
    let Session {
        parsed,
        name,
        auth,
        client,
    } = Session::open(credentials, reference)?;
    let subject_ref = parsed.clone_with_digest(manifest.to_string());
    let (subject, _) = timed(
        &name,
        timeout,
        client.pull_manifest_raw(&subject_ref, &auth, &[OCI_IMAGE_MEDIA_TYPE]),
    )
    .await?;
    let layer = ImageLayer::new(bundle.to_vec(), BUNDLE_ARTIFACT_TYPE.to_owned(), None);
    let config = Config::new(b"{}".to_vec(), EMPTY_MEDIA_TYPE.to_owned(), None);
    let mut referrer = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    referrer.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    referrer.artifact_type = Some(BUNDLE_ARTIFACT_TYPE.to_owned());
    referrer.subject = Some(OciDescriptor {
        media_type: OCI_IMAGE_MEDIA_TYPE.to_owned(),
        digest: manifest.to_string(),
        size: subject.len() as i64,
        ..Default::default()
    });
    let referrer_json = serde_json::to_vec(&referrer).map_err(|e| ArtifactError::Remote {
        reference: name.clone(),
        message: e.to_string(),
    })?;
    let referrer_digest = Digest::of(&referrer_json);
    // Blobs first, then the manifest by its digest (no tag of its own).
    timed(
        &name,
        timeout,
        client.auth(&parsed, &auth, oci_client::RegistryOperation::Push),
    )
    .await?;
    timed(
        &name,
        timeout,
        client.push_blob(&parsed, layer.data.clone(), &layer.sha256_digest()),
    )
    .await?;
    timed(
        &name,
        timeout,
        client.push_blob(&parsed, config.data.clone(), &config.sha256_digest()),
    )
    .await?;
    let by_digest = parsed.clone_with_digest(referrer_digest.to_string());
    timed(
        &name,
        timeout,
        client.push_manifest_raw(
            &by_digest,
            referrer_json.clone(),
            OCI_IMAGE_MEDIA_TYPE
                .parse()
                .map_err(|_| ArtifactError::Remote {
                    reference: name.clone(),
                    message: "media type".into(),
                })?,
        ),
    )
    .await?;
    // The referrers tag schema: sha256-<hex> holds an index of referrers.
    let tag_ref = Reference::with_tag(
        parsed.registry().to_owned(),
        parsed.repository().to_owned(),
        format!("sha256-{}", manifest.hex()),
    );
    let mut index = match timed(
        &name,
        timeout,
        client.pull_manifest_raw(&tag_ref, &auth, &[INDEX_MEDIA_TYPE]),
    )
    .await
    {
        Ok((raw, _)) => {
            serde_json::from_slice::<OciImageIndex>(&raw).unwrap_or_else(|_| empty_index())
        }
        Err(ArtifactError::NotFound { .. }) => empty_index(),
        Err(e) => return Err(e),
    };
    if !index
        .manifests
        .iter()
        .any(|m| m.digest == referrer_digest.to_string())
    {
        index.manifests.push(ImageIndexEntry {
            media_type: OCI_IMAGE_MEDIA_TYPE.to_owned(),
            digest: referrer_digest.to_string(),
            size: referrer_json.len() as i64,
            platform: None,
            annotations: None,
            artifact_type: Some(BUNDLE_ARTIFACT_TYPE.to_owned()),
        });
    }
    let index_json = serde_json::to_vec(&index).map_err(|e| ArtifactError::Remote {
        reference: name.clone(),
        message: e.to_string(),
    })?;
    timed(
        &name,
        timeout,
        client.push_manifest_raw(
            &tag_ref,
            index_json,
            INDEX_MEDIA_TYPE
                .parse()
                .map_err(|_| ArtifactError::Remote {
                    reference: name.clone(),
                    message: "media type".into(),
                })?,
        ),
    )
    .await?;
    Ok(referrer_digest)
}

fn empty_index() -> OciImageIndex {
    OciImageIndex {
        schema_version: 2,
        media_type: Some(INDEX_MEDIA_TYPE.to_owned()),
        manifests: Vec::new(),
        artifact_type: None,
        annotations: None,
    }
}
